"""Third-party requirements for the replay's child: a packed PEX's wheels, unpacked onto its import path.

Pants builds the suite's requirements as a packed PEX, whose `.deps/*.whl` entries are zipped installed
wheels. Python can import pure modules from a zip but not extension modules, so each is unpacked into
the sandbox (zipfile refuses absolute and `..` member paths) before the child starts.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Iterable

UNPACKED = "__requirements_unpacked"  # beside the replay's output folder, never inside it


def unpacked(paths: Iterable[str], into: Path) -> list[str]:
    """The import path entries for `paths`: a zip is unpacked under `into`, a folder is used as it is."""
    entries = []
    for path in paths:
        if zipfile.is_zipfile(path):
            target = into / Path(path).name
            with zipfile.ZipFile(path) as archive:
                archive.extractall(target)
            entries.append(str(target))
        else:
            entries.append(path)
    return entries
