"""The deployment helpers: finding the jar and the configuration a server needs."""
import pytest

import mapwithstate as mws


def test_missing_jar_is_named(monkeypatch, tmp_path):
    missing = tmp_path / "nowhere" / "mapwithstate-assembly-0.1.0.jar"
    monkeypatch.setenv("MAPWITHSTATE_JAR", str(missing))
    with pytest.raises(FileNotFoundError, match=str(missing)):
        mws.jar_path()
    with pytest.raises(FileNotFoundError, match="not a file"):
        mws.local_session()


def test_server_conf_names_the_plugin_classes(tmp_path):
    jar = tmp_path / "plugin.jar"
    conf = mws.server_conf(str(jar))
    assert conf == {
        "spark.jars": str(jar),
        "spark.connect.extensions.relation.classes":
            "io.mapwithstate.connect.MapWithStateRelationPlugin,"
            "io.mapwithstate.connect.StateReaderRelationPlugin,"
            "io.mapwithstate.connect.StateRepartitionRelationPlugin",
        "spark.sql.extensions": "io.mapwithstate.MapWithStateExtensions",
        "spark.sql.streaming.checkpointFileManagerClass":
            "io.mapwithstate.state.LocalCheckpointFileManager",
        "spark.connect.grpc.interceptor.classes": "io.mapwithstate.connect.BoundedErrorTrailers",
    }


def test_the_built_jar_holds_the_plugin_classes():
    import zipfile

    names = set(zipfile.ZipFile(mws.jar_path()).namelist())
    assert "io/mapwithstate/connect/MapWithStateRelationPlugin.class" in names
    assert "io/mapwithstate/connect/StateReaderRelationPlugin.class" in names
    assert "io/mapwithstate/connect/StateRepartitionRelationPlugin.class" in names
    assert "io/mapwithstate/connect/BoundedErrorTrailers.class" in names
    assert "io/mapwithstate/MapWithStateExtensions.class" in names
    assert "io/mapwithstate/proto/MapWithState.class" in names
    # Spark, Scala and protobuf come from the server, never from our jar; our one class in
    # Spark's package is the streaming glue, which needs package-private members.
    foreign = [n for n in names
               if not n.endswith("/") and n.startswith(("org/apache/spark/", "scala/", "com/google/protobuf/",
                                "org/sparkproject/"))
               and not n.startswith("org/apache/spark/sql/mapwithstate/")]
    assert foreign == []


def test_package_jars_come_from_the_packages_dir(monkeypatch, tmp_path):
    (tmp_path / "kafka").mkdir()
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / "kafka" / name).write_text("")
    monkeypatch.setenv("MAPWITHSTATE_PACKAGES_DIR", str(tmp_path))
    assert mws.package_jars("kafka") == [str(tmp_path / "kafka" / "a.jar"),
                                         str(tmp_path / "kafka" / "b.jar")]


def test_package_jars_name_what_is_wrong(monkeypatch, tmp_path):
    monkeypatch.setenv("MAPWITHSTATE_PACKAGES_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"'kafka' has no jars in .*dev/fetch-kafka"):
        mws.package_jars("kafka")
    with pytest.raises(ValueError, match=r"unknown package 'kafak'; known: 'kafka'"):
        mws.package_jars("kafak")
    with pytest.raises(TypeError, match=r"packages=\['kafka'\]"):
        mws.LocalConnectServer(packages="kafka")
