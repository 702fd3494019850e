"""The node switch's Vast calls once the v0 single-instance routes answer 410
(`deprecated_endpoint`, peers 2026-12-07 V6/V7): the read comes from the v1 list (our own id
only, in the v0 shape), the delete goes to v1, and a 410 is never "gone"."""

from __future__ import annotations

import json

from mvp_tui.node.instance_api import Credentials
from mvp_tui.providers.vastai.node_api import VastInstanceApi
from tests.fakes.vastai_server import FakeVast, Fault

REFUSED = Fault(status=401, body={"success": False, "error": "auth_error",
                                  "msg": "Invalid user key"})
RETIRED = Fault(status=410, body={"success": False, "error": "deprecated_endpoint",
                                  "msg": "/api/v1/instances/ is deprecated."})


def _api(fake: FakeVast, iid: int) -> VastInstanceApi:
    key = fake.instance_env(iid)["CONTAINER_API_KEY"]
    return VastInstanceApi(fake.url, Credentials("vastai", str(iid), key, "agent env"))


def test_the_read_after_a_410_is_our_own_row_from_the_v1_list() -> None:
    with FakeVast() as fake:
        iid = fake.add_instance(label="mvp-r-1")
        other = fake.add_instance(label="someone-else")
        fake.retired_v0 = {"show"}
        api = _api(fake, iid)

        answer = api.read()

        assert api.shows_self(answer) and not api.is_gone(answer)
        (v0, v1) = [r for r in fake.requests if r.method == "GET"]
        assert (v0.path, v1.path) == (f"/api/v0/instances/{iid}/", "/api/v1/instances/")
        assert json.loads(v1.query["select_filters"]) == {"id": {"eq": iid}}
        assert fake.scope_violations == [] and other not in fake.destroyed()


def test_a_410_on_the_delete_is_sent_again_on_v1_and_the_v1_read_confirms_it() -> None:
    with FakeVast() as fake:
        iid = fake.add_instance()
        fake.retired_v0 = {"show", "destroy"}
        api = _api(fake, iid)

        deleted = api.delete()

        assert deleted.status == 200 and api.delete_accepted(deleted)
        assert fake.destroyed_by(iid) == "instance"
        assert [r.path for r in fake.requests if r.method == "DELETE"] == [
            f"/api/v0/instances/{iid}/", f"/api/v1/instances/{iid}/"]
        assert api.is_gone(api.read())  # no longer in the v1 list: gone
        assert fake.scope_violations == []


def test_a_410_alone_is_never_gone() -> None:
    """v1 refusing as well (here: the list rejects the key): neither gone nor ours, so the
    switch keeps trying and never records a destroy that did not happen."""
    with FakeVast() as fake:
        iid = fake.add_instance()
        fake.retired_v0 = {"show", "destroy"}
        api = _api(fake, iid)
        fake.script("list", REFUSED)
        fake.script("destroy", RETIRED, RETIRED)  # v0 retired, and v1 too

        read, deleted = api.read(), api.delete()

        assert read.status == 401 and not api.is_gone(read) and not api.shows_self(read)
        assert deleted.status == 410 and not api.is_gone(deleted)
        assert not api.delete_accepted(deleted)
        assert fake.billing() != []

