"""`mnemo dev` hands its children the data dir, so task artifacts land in it, not in the working directory."""

from pathlib import Path

from api.devstack.stack import DevOptions, DevStack
from api.settings import Settings


def test_children_get_the_data_dir_and_the_services(tmp_path: Path) -> None:
    stack = DevStack(DevOptions(data_dir=tmp_path / "dev", port=18000, temporal_port=17233))
    stack.settings = Settings(database_url="postgresql+psycopg://u:p@127.0.0.1:5/mnemo", temporal_address="127.0.0.1:17233")
    env = stack._child_env()
    assert env["MNEMO_DATA_DIR"] == str((tmp_path / "dev").resolve())
    assert env["MNEMO_API_PORT"] == "18000"
    assert env["MNEMO_TEMPORAL_ADDRESS"] == "127.0.0.1:17233"
