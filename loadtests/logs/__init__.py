"""Recorded logs and public traces: one small reader per format, all yielding `LogRecord`s.

Files are streamed line by line, never loaded whole. `read_log` (in `formats`) picks the reader,
applies the checks every format shares (a known language and API, timestamps that never go
backwards) and counts what it had to skip in a `Problems`.
"""
