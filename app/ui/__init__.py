"""All Qt code lives here."""
