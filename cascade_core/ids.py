"""What an id a user chooses may be: a trace's id, a sim file's name (how any id becomes a
NATS subject token: `cascade_nats.subject_tokens`; where new ids come from: `cascade_host.new_ids`)."""

from __future__ import annotations

import re

TRACE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# A sim file's name as the reference allows it: also safe as a file name on any disk.
FILE_NAME_PATTERN = r"^(?!\.\.?$)[A-Za-z0-9._-]{1,128}$"


def is_trace_id(value: str) -> bool:
    return re.fullmatch(TRACE_ID_PATTERN, value) is not None


def is_file_name(value: str) -> bool:
    return re.fullmatch(FILE_NAME_PATTERN, value) is not None
