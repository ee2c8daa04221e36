"""What ``varlens train`` does with its run folder, so that no finished work is lost:

- a folder that already holds files is refused unless ``--resume`` (continue it) or
  ``--overwrite`` (delete its checkpoints and start afresh) is given, naming both;
- ``.tmp`` files left by checkpoint writes that were killed are removed at the next start;
- ``--resume`` takes the newest checkpoint that loads, saying which newer ones were skipped
  as corrupt and why;
- a write that fails for lack of space or a file-size limit ends with ``WriteFailedError``
  naming the last good checkpoint and the command that continues from it.
"""
from __future__ import annotations

import contextlib
import errno
import os
import sys

WRITE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EFBIG: "a file-size limit was reached",
                errno.EDQUOT: "the disk quota is exhausted", errno.EROFS: "the file system is read-only",
                errno.EIO: "an input/output error occurred"}


class RunFolderNotEmptyError(ValueError):
    """``varlens train`` without --resume or --overwrite on a folder that already holds a run."""


class WriteFailedError(RuntimeError):
    """Writing the run folder failed (full disk, file-size limit); the message names the last
    good checkpoint and how to resume from it."""


def remove_stale(out, quiet=False):
    """Remove temporary files of interrupted checkpoint writes in ``out`` and its checkpoints/."""
    from varlens.serialization import remove_stale_temp_files
    removed = remove_stale_temp_files(out) + remove_stale_temp_files(os.path.join(out, "checkpoints"))
    if removed and not quiet:
        print(f"removed {len(removed)} temporary file(s) left by interrupted checkpoint writes in {out}", flush=True)
    return removed


def _report_skipped(skipped):
    for p, why in skipped:
        print(f"warning: skipping checkpoint {p}: {why}", file=sys.stderr, flush=True)


def newest_valid(out, purpose):
    """The newest valid checkpoint of a run folder, reporting corrupt newer ones on stderr;
    raises FileNotFoundError / CheckpointError when there is none."""
    from varlens.train.checkpoint import CheckpointError, newest_valid_checkpoint
    path, skipped = newest_valid_checkpoint(out)
    _report_skipped(skipped)
    if path is None:
        where = os.path.join(out, "checkpoints")
        if skipped:
            raise CheckpointError(f"{purpose}: no valid checkpoint in {where}: all {len(skipped)} found are "
                                  "corrupt or unreadable (see the warnings above)")
        raise FileNotFoundError(f"{purpose}: no checkpoint in {where}")
    if skipped:
        print(f"{purpose}: using {path}, the newest valid checkpoint", file=sys.stderr, flush=True)
    return path


def prepare(out, resume, overwrite, quiet):
    """Check and tidy the run folder before a run; returns the checkpoint to resume from (or None)."""
    from varlens.train.checkpoint import CheckpointError, load
    from varlens.train.trainer import list_checkpoints
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other: --resume continues the run in the "
                         "folder, --overwrite deletes it; give one")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out!r} is a file, not a run folder")
    remove_stale(out, quiet)
    if resume == "latest":
        return newest_valid(out, "--resume")
    if resume:
        try:
            load(resume)
        except CheckpointError as e:
            from varlens.train.checkpoint import newest_valid_checkpoint
            alt, _ = newest_valid_checkpoint(out)
            hint = f"; the newest valid checkpoint in {out} is {alt} (--resume {alt})" if alt else ""
            raise CheckpointError(f"--resume {resume}: {e}{hint}") from None
        return resume
    entries = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if not entries:
        return None
    ckpts = list_checkpoints(out)
    if not overwrite:
        held = (f"{len(ckpts)} checkpoint(s), newest {ckpts[-1]}" if ckpts
                else f"files: {', '.join(entries[:5])}{', ...' if len(entries) > 5 else ''}")
        raise RunFolderNotEmptyError(
            f"run folder {out} already holds a run ({held}); refusing to start over it. Pass --resume to "
            f"continue it, --overwrite to delete its checkpoints and start afresh, or --out DIR for a new folder")
    for c in ckpts:
        os.unlink(c)
    if not quiet:
        print(f"--overwrite: removed {len(ckpts)} checkpoint(s) of the earlier run in {out}", flush=True)
    return None


@contextlib.contextmanager
def writes_checked(out, cfg):
    """Turn an OSError from a failed write (full disk, file-size limit, ...) into WriteFailedError
    naming the last good checkpoint and the command that continues from it."""
    try:
        yield
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        from varlens.train.checkpoint import newest_valid_checkpoint
        path, _ = newest_valid_checkpoint(out)
        if path:
            then = (f"The last good checkpoint is {path}; free some space and continue from it with "
                    f"`varlens train {cfg.get('recipe', 'RECIPE')} --out {out} --resume` (with the same options)")
        else:
            then = "No checkpoint was written before it, so there is nothing to resume; free some space and start again"
        raise WriteFailedError(f"writing to the run folder {out} failed: {WRITE_ERRNOS[e.errno]} ({e.strerror}"
                               f"{': ' + str(e.filename) if e.filename else ''}). {then}. No checkpoint was left "
                               "half-written.") from None
