"""The headless front-ends that ask a person: terminal, kdialog, zenity, none."""
