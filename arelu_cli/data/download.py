"""Downloads for ``arelu prepare`` without ``--source``: the Hugging Face hub or an archive URL.

Both first check that the host answers (a few seconds), so that an offline machine gets one
line naming ``--source`` instead of minutes of retries and a traceback. Archives are kept
under ``$ARELU_CACHE`` (default ``~/.cache/arelu``) and read like a ``--source`` folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import tarfile
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from arelu_cli.data.corpora import CorpusSpec, HubSource
from arelu_cli.data.prepared import atomic_dir, clean_leftovers
from arelu_cli.util.errors import UserError

HUB_HOST = "huggingface.co"


def cache_dir() -> Path:
    """Where downloaded archives are extracted."""
    return Path(os.environ.get("ARELU_CACHE", Path.home() / ".cache" / "arelu"))


def _offline(spec: CorpusSpec, where: str, reason: object) -> UserError:
    return UserError(f"cannot download {spec.name} from {where} ({reason}); without internet, "
                     f"give local files in the publisher's layout with --source DIR")


def _check_online(spec: CorpusSpec, host: str, port: int) -> None:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as err:
        raise _offline(spec, host, err) from None


def fetch_hub(spec: CorpusSpec, hub: HubSource, splits: list[str],
              src: str, tgt: str) -> dict[str, tuple[list[str], list[str]]]:
    """The requested splits of a hub data set as (source lines, target lines)."""
    try:
        import datasets
    except ImportError:
        raise UserError(f"downloading {spec.name} from the Hugging Face hub needs the datasets "
                        f"package: pip install -e \".[download]\" (or pip install datasets), "
                        f"or give local files in the publisher's layout with --source DIR"
                        ) from None
    _check_online(spec, HUB_HOST, 443)

    out = {}
    for split in splits:
        try:
            rows = datasets.load_dataset(hub.path, hub.config, split=hub.splits[split])
        except (ConnectionError, OSError) as err:
            raise _offline(spec, f"the hub ({hub.path})", err) from None
        columns = rows["translation"] if "translation" in rows.column_names else None
        if columns is not None:
            out[split] = ([r[src] for r in columns], [r[tgt] for r in columns])
        else:
            out[split] = (list(rows[src]), list(rows[tgt]))
    return out


def fetch_archive(spec: CorpusSpec, url: str, subdir: str) -> Path:
    """Download and extract a ``.tgz`` once; returns the folder in the publisher's layout.

    The archive is fetched and extracted into a hidden folder beside the cache entry
    (:func:`arelu_cli.data.prepared.atomic_dir`) that becomes the entry only once complete;
    the hidden folders of killed downloads are removed first."""
    target = cache_dir() / spec.name
    clean_leftovers(target)
    if (target / subdir).is_dir():
        return target / subdir
    parsed = urlparse(url)
    _check_online(spec, parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80))
    with atomic_dir(target) as work:
        _download_into(spec, url, work)
    return target / subdir


def _download_into(spec: CorpusSpec, url: str, work: Path) -> None:
    """The archive at ``url`` extracted into the folder ``work`` (the archive not kept)."""
    archive = work / ".archive.tgz"
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(archive, "wb") as handle:
            shutil.copyfileobj(response, handle)
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
    except OSError as err:
        raise _offline(spec, url, err) from None
    except tarfile.TarError:  # its message spans lines
        raise UserError(f"the download of {spec.name} from {url} is not a readable .tgz "
                        "archive; try again, or give local files with --source DIR") from None
    finally:
        archive.unlink(missing_ok=True)
