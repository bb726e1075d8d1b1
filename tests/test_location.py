"""One suite for :class:`fsdask.io.location.Location`, run on a local folder and on S3.

Modelled on zarr-python's ``testing/store.py``: :class:`LocationTests` holds the tests; a
subclass says where the places are (``base``, ``storage_options``) and gives an *oracle*
that sees the effect by going around the class under test (``os``/``pathlib`` locally, a
raw ``s3fs`` file system of its own on the S3 test server).
"""

from __future__ import annotations

import json
import os
import pathlib
import socket

import fsspec
import pytest
import zarr

from fsdask.errors import StoreError
from fsdask.io.location import (
    COMPLETE_ATTR,
    KIND_ATTR,
    FsspecLocation,
    LocalLocation,
    Location,
)

KEY, SECRET = "AKIALOCATIONTEST0001", "location-very-secret-42"


def _store_json(kind: str | None, complete: bool = True, tag: str = "") -> bytes:
    attrs = {"tag": tag}
    if kind is not None:
        attrs.update({KIND_ATTR: kind, COMPLETE_ATTR: complete})
    return json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs}).encode()


class LocationTests:
    """The tests; subclasses provide the ``place`` fixture: (base URL, storage options, oracle).

    The oracle has ``write(key, bytes)``, ``read(key) -> bytes | None`` and ``names(key)``
    (the entries directly under ``key``), with keys relative to the base.
    """

    location_cls: type[Location]

    @pytest.fixture
    def place(self):
        raise NotImplementedError

    def loc(self, place, name: str) -> Location:
        base, opts, _ = place
        return Location.of(f"{base}/{name}", opts)

    def write_store(self, loc: Location, target: str, kind: str, tag: str) -> None:
        """Write a minimal fsdask store at ``target`` (what a writer does inside ``publish``)."""
        opts = loc.storage_options if not loc.is_local else {"auto_mkdir": True}
        array_meta = json.dumps({"zarr_format": 3, "node_type": "array"}).encode()
        files = [("X/c/0", b"block"), ("X/zarr.json", array_meta)]
        for key, data in files + [("zarr.json", _store_json(kind, tag=tag))]:
            with fsspec.open(f"{target}/{key}", "wb", **opts) as fh:
                fh.write(data)

    def test_of_gives_the_right_kind(self, place):
        assert isinstance(self.loc(place, "a.zarr"), self.location_cls)

    def test_exists(self, place):
        _, _, oracle = place
        loc = self.loc(place, "a.zarr")
        assert not loc.exists() and loc.what_is_there() == ("", None)
        oracle.write("a.zarr/zarr.json", _store_json(None))
        assert loc.exists()
        assert loc.what_is_there() == ("a Zarr store fsdask did not write", None)

    def test_publish_writes_and_leaves_no_temporary(self, place):
        _, _, oracle = place
        loc = self.loc(place, "out.zarr")
        with loc.publish(kind="dataset") as target:
            assert target != loc.target and ".fsdask-tmp-" in target
            self.write_store(loc, target, "dataset", "first")
        meta = json.loads(oracle.read("out.zarr/zarr.json"))
        assert meta["attributes"]["tag"] == "first"
        assert oracle.read("out.zarr/X/c/0") == b"block"
        assert [n for n in oracle.names("") if "fsdask-tmp" in n] == []
        assert loc.what_is_there() == ("an fsdask dataset", "dataset")

    def test_publish_replaces_only_with_overwrite_and_the_same_kind(self, place):
        _, _, oracle = place
        loc = self.loc(place, "out.zarr")
        with loc.publish(kind="dataset") as target:
            self.write_store(loc, target, "dataset", "first")
        with pytest.raises(StoreError, match="already exists"):
            with loc.publish(kind="dataset") as target:
                pytest.fail("publish must refuse before the block runs")
        with pytest.raises(StoreError, match="not a result"):
            with loc.publish(kind="result", overwrite=True) as target:
                pytest.fail("publish must refuse before the block runs")
        with loc.publish(kind="dataset", overwrite=True) as target:
            self.write_store(loc, target, "dataset", "second")
        assert json.loads(oracle.read("out.zarr/zarr.json"))["attributes"]["tag"] == "second"

    def test_a_failed_publish_leaves_the_target_untouched(self, place):
        _, _, oracle = place
        loc = self.loc(place, "out.zarr")
        with loc.publish(kind="dataset") as target:
            self.write_store(loc, target, "dataset", "first")
        with pytest.raises(RuntimeError, match="writer died"):
            with loc.publish(kind="dataset", overwrite=True) as target:
                self.write_store(loc, target, "dataset", "second")
                raise RuntimeError("writer died")
        assert json.loads(oracle.read("out.zarr/zarr.json"))["attributes"]["tag"] == "first"
        assert [n for n in oracle.names("") if "fsdask-tmp" in n] == []

    def test_publish_refuses_what_fsdask_did_not_write(self, place):
        _, _, oracle = place
        oracle.write("theirs.zarr/zarr.json", _store_json(None, tag="theirs"))
        loc = self.loc(place, "theirs.zarr")
        with pytest.raises(StoreError, match="did not write"):
            with loc.publish(kind="dataset", overwrite=True):
                pytest.fail("publish must refuse before the block runs")
        assert json.loads(oracle.read("theirs.zarr/zarr.json"))["attributes"]["tag"] == "theirs"

    def test_publish_refuses_the_input(self, place):
        loc = self.loc(place, "in.zarr")
        with pytest.raises(StoreError, match="destroy the input"):
            loc.check_output(kind="dataset", inputs=(loc.url,))

    def test_remove_refuses_foreign(self, place):
        _, _, oracle = place
        oracle.write("theirs.zarr/zarr.json", _store_json(None, tag="theirs"))
        oracle.write("notes.txt", b"mine, not fsdask's")
        for name in ("theirs.zarr", "notes.txt"):
            with pytest.raises(StoreError, match="removes only its own outputs"):
                self.loc(place, name).remove("dataset")
        assert oracle.read("theirs.zarr/zarr.json") is not None
        assert oracle.read("notes.txt") == b"mine, not fsdask's"

    def test_remove_refuses_another_kind_and_removes_its_own(self, place):
        _, _, oracle = place
        loc = self.loc(place, "out.zarr")
        assert loc.remove("dataset") is False  # nothing there
        with loc.publish(kind="dataset") as target:
            self.write_store(loc, target, "dataset", "mine")
        with pytest.raises(StoreError, match="not an fsdask result"):
            loc.remove("result")
        assert oracle.read("out.zarr/zarr.json") is not None
        assert loc.remove("dataset") is True
        assert oracle.read("out.zarr/zarr.json") is None
        assert oracle.read("out.zarr/X/c/0") is None

    def test_zarr_kwargs_reach_the_place(self, place):
        _, _, oracle = place
        loc = self.loc(place, "z.zarr")
        group = zarr.open_group(loc.target, mode="w", zarr_format=3, **loc.zarr_kwargs())
        group.attrs["hello"] = "world"
        meta = json.loads(oracle.read("z.zarr/zarr.json"))
        assert meta["attributes"]["hello"] == "world"

    def test_check_reachable(self, place):
        self.loc(place, "a.zarr").check_reachable()  # the storage answers

    def test_shown_has_no_credentials(self, place):
        loc = self.loc_with_credentials(place, "a.zarr")
        assert KEY not in loc.shown and SECRET not in loc.shown
        assert loc.shown.endswith("a.zarr") and KEY not in repr(loc)

    def loc_with_credentials(self, place, name: str) -> Location:
        return self.loc(place, name)


class TestLocalLocation(LocationTests):
    location_cls = LocalLocation

    class Oracle:
        def __init__(self, root: pathlib.Path):
            self.root = root

        def write(self, key: str, data: bytes) -> None:
            path = self.root / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        def read(self, key: str) -> bytes | None:
            path = self.root / key
            return path.read_bytes() if path.is_file() else None

        def names(self, key: str) -> list[str]:
            return sorted(os.listdir(self.root / key))

    @pytest.fixture
    def place(self, tmp_path):
        root = tmp_path / "place"
        root.mkdir()
        return str(root), None, self.Oracle(root)

    def test_file_url_is_the_same_place(self, place):
        base, _, oracle = place
        oracle.write("a.zarr/zarr.json", _store_json(None))
        loc = Location.of(f"file://{base}/a.zarr")
        assert isinstance(loc, LocalLocation) and loc.exists()
        assert loc.target == f"{base}/a.zarr"
        assert loc.overlaps(Location.of(f"{base}/a.zarr/sub"))


class TestS3Location(LocationTests):
    location_cls = FsspecLocation
    pytestmark = pytest.mark.s3

    class Oracle:
        def __init__(self, bucket: str, opts: dict):
            import s3fs

            # an instance of its own, no listings cache: it sees what is stored, not a copy
            self.fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **opts)
            self.root = bucket.removeprefix("s3://")

        def write(self, key: str, data: bytes) -> None:
            self.fs.pipe_file(f"{self.root}/{key}", data)

        def read(self, key: str) -> bytes | None:
            try:
                return self.fs.cat_file(f"{self.root}/{key}")
            except FileNotFoundError:
                return None

        def names(self, key: str) -> list[str]:
            path = f"{self.root}/{key}".rstrip("/")
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False))

    @pytest.fixture
    def place(self, s3):
        bucket, opts = s3
        return bucket, opts, self.Oracle(bucket, opts)

    def loc_with_credentials(self, place, name: str) -> Location:
        base, opts, _ = place
        return Location.of(base.replace("s3://", f"s3://{KEY}:{SECRET}@") + f"/{name}", opts)

    def test_check_reachable_fails_fast_on_a_dead_endpoint(self, place):
        base, opts, _ = place
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        loc = Location.of(f"{base}/a.zarr", {**opts, "endpoint_url": f"http://127.0.0.1:{port}"})
        with pytest.raises(StoreError, match="storage unreachable") as info:
            loc.check_reachable(timeout=1.0)
        assert "\n" not in str(info.value)

    def test_zarr_kwargs_carry_the_storage_options(self, place):
        base, opts, _ = place
        assert Location.of(f"{base}/a.zarr", opts).zarr_kwargs() == {"storage_options": opts}
