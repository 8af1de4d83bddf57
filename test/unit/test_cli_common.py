"""What the ``saycan`` verbs share (saycan_ros.cli.common)."""
import gzip
import json

from saycan_ros.cli.common import write_json


def test_a_report_is_gzipped_where_its_name_says_so(tmp_path):
    data = [{"plan_success": 3, "tasks": 4, "text": "Bring me the sponge."}]
    write_json(str(tmp_path / "r.json.gz"), data)
    write_json(str(tmp_path / "r.json"), data)
    with gzip.open(tmp_path / "r.json.gz", "rt", encoding="utf-8") as handle:
        assert json.load(handle) == data
    assert json.loads((tmp_path / "r.json").read_text()) == data
