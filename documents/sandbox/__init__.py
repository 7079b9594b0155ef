"""Where untrusted bytes are read: a child process per worker under CPU, memory and wall-time
limits (``runner``: the worker's side; ``child``: the process itself, free of Django and the
database; ``ocr_page``: one page rendered and recognised per call inside it). Kept empty so
that the child imports nothing of the worker's side."""
