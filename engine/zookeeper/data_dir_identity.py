"""Which disk this is and which cluster it belongs to: ``DATA_DIR/identity``.

    identity := JSON {"cluster_id": hex32, "data_dir_id": hex32}, with a checksum
                (``twinlog.engine.base.atomic_file.with_checksum``)

``data_dir_id`` names the disk, not the cluster (KIP-903): it is created with the
directory and kept beside the data, so a wiped disk comes back as a new directory.
``cluster_id`` is the cluster's (from ZooKeeper), written at the first open: a data
directory pointed at another cluster's ZooKeeper is refused, never mixed into it. The
store compares it (``recorded_cluster_id``, ``refuse_other_cluster``) before its first
write to ZooKeeper, so a refused broker leaves no cluster id or parent behind there.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from twinlog.engine.base.atomic_file import read_checked, replace_file, with_checksum
from twinlog.engine.base.errors import CorruptJournalError, InvalidConfigError

IDENTITY_FILE = "identity"


def recorded_cluster_id(data_dir: str | os.PathLike[str]) -> str | None:
    """The cluster the directory was claimed for, None if it never was; read only, so a
    broker can compare it with ZooKeeper's before writing there."""
    path = Path(data_dir) / IDENTITY_FILE
    if not path.exists():
        return None
    return _read(path)[0]


def refuse_other_cluster(
    data_dir: str | os.PathLike[str], recorded: str, found: str | None, where: str
) -> None:
    """InvalidConfigError unless ``found`` (ZooKeeper's cluster at ``where``; None: none
    there yet) is the cluster ``recorded`` in the directory."""
    if found == recorded:
        return
    if found is None:
        raise InvalidConfigError(
            f"{data_dir} belongs to cluster {recorded}, and {where} holds no cluster: check "
            "the ZooKeeper address and chroot (a ZooKeeper that lost its data would need the "
            "cluster restored, not a new one); nothing was written to ZooKeeper"
        )
    raise InvalidConfigError(
        f"{data_dir} belongs to cluster {recorded}, and {where} holds cluster {found}: check "
        "the ZooKeeper address and chroot; nothing was written to ZooKeeper"
    )


def claim_data_dir(data_dir: str | os.PathLike[str], cluster_id: str) -> str:
    """The directory's ``data_dir_id``, created (with the directory) at the first open.

    InvalidConfigError if the directory belongs to another cluster.
    """
    path = Path(data_dir) / IDENTITY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        data_dir_id = uuid.uuid4().hex
        document = {"cluster_id": cluster_id, "data_dir_id": data_dir_id}
        replace_file(path, with_checksum(json.dumps(document).encode()))
        return data_dir_id
    stored_cluster_id, data_dir_id = _read(path)
    if stored_cluster_id != cluster_id:
        raise InvalidConfigError(
            f"{path.parent} belongs to cluster {stored_cluster_id}, and this ZooKeeper holds "
            f"cluster {cluster_id}: check the ZooKeeper address and chroot"
        )
    return data_dir_id


def _read(path: Path) -> tuple[str, str]:
    """(cluster_id, data_dir_id) of an identity file; CorruptJournalError if damaged."""
    try:
        stored = json.loads(read_checked(path))
        return str(stored["cluster_id"]), str(stored["data_dir_id"])
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptJournalError(
            f"{path}: data directory identity is damaged ({error}); restore it from a backup"
        ) from None
