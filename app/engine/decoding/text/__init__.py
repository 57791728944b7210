"""Text on its way in and out of a model: one cleaning step for what a tokenizer or the database
receives (`clean.py`), and tokens turned into text as they stream (`detokenize.py`)."""
