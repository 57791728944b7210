"""What users measure: the `bench` harness, draft agreement and the toy models. The app's
runtime path never imports it (an import-linter contract); the developers' lab is `lab/`."""
