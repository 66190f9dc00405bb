"""The scripts that redraw the paper's figures, run from the repository root as
``python -m validation.figures.NAME`` (``docs/figures.md``); ``common`` holds what they share
(the point cache, the executor, the command line written into each output)."""
