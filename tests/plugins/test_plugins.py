"""The one registry type behind models, metrics, embedders and experiments: each kind finds a plug-in
registered through a real entry point (a distribution's metadata written onto sys.path), unknown names
and options are errors listing what is accepted, a broken plug-in names itself and its distribution,
and the built-ins come from ragsense's own metadata (pyproject.toml), not from a list in the code."""

from __future__ import annotations

import doctest
import importlib
import json
import re
import sys
import textwrap
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from ragsense.cli import main
from ragsense.embeddings import CachedEmbedder, available_embedders, load_embedder
from ragsense.errors import ModelNotFoundError, ParameterError, PluginError
from ragsense.evaluation import available_metrics, create_metric
from ragsense.experiments import EXPERIMENTS
from ragsense.models import available_backends, load_model, resolve_name
from ragsense.plugins import EntryPointRegistry, Plugin, accepted_options

PLUGIN = '''
"""A third-party distribution with one plug-in of each kind."""

from ragsense.models import load_model


def create_echo_model(model_id, *, window=64):
    # A backend may wrap another: here the fake model under this plug-in's name.
    return load_model("fake:" + model_id, context_window=window)


class LetterCounts:
    """Embeds a text as the counts of a, b and c."""

    name = "letter-counts"

    def __init__(self, *, letters="abc"):
        self.letters = letters

    def embed(self, texts):
        import numpy as np

        return np.array([[t.count(c) for c in self.letters] for t in texts], dtype=np.float32)


def toy_experiment(*, model, data=None, limit=None, seed=0, out=None):
    return {"model": model.info.name, "limit": limit, "seed": seed}
'''

BROKEN = 'raise RuntimeError("the plug-in needs a licence key")\n'


class Distribution:
    """A distribution written onto sys.path: its modules and its dist-info with entry points."""

    def __init__(self, site: Path) -> None:
        self.site = site
        self.modules: list[str] = []

    def install(self, name: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str]) -> None:
        info = self.site / f"{name.replace('-', '_')}-0.1.dist-info"  # the stem's first '-' ends the name
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(
            "".join(
                f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
                for group, eps in entry_points.items()
            )
        )
        for module, source in modules.items():
            (self.site / f"{module}.py").write_text(textwrap.dedent(source))
            self.modules.append(module)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Distribution]:
    dist = Distribution(tmp_path / "site")
    dist.site.mkdir()
    monkeypatch.syspath_prepend(str(dist.site))
    yield dist
    for module in dist.modules:
        sys.modules.pop(module, None)


@pytest.fixture
def plugin(site: Distribution) -> Distribution:
    site.install(
        "toyplug",
        {
            "ragsense.models": {"echo": "toyplug_mod:create_echo_model"},
            "ragsense.embeddings": {"letter-counts": "toyplug_mod:LetterCounts"},
            "ragsense.experiments": {"toy": "toyplug_mod:toy_experiment"},
            "ragsense.metrics": {"broken": "toyplug_broken:Broken", "missing": "toyplug_mod:NoSuchThing"},
        },
        {"toyplug_mod": PLUGIN, "toyplug_broken": BROKEN},
    )
    return site


# ------------------------------------------------------------------------------------------ built-ins


def test_the_builtins_come_from_ragsense_metadata() -> None:
    # The entry points, not a list in the code, name them; each built-in's distribution is ragsense.
    for group, kind, names in [
        ("ragsense.models", "model backend", {"transformers", "openai", "fake", "vllm"}),
        ("ragsense.metrics", "metric", {"consens", "attribution", "vera", "correctness", "similarity"}),
        ("ragsense.embeddings", "embedder", {"minilm", "all-minilm-l6-v2"}),
        ("ragsense.experiments", "experiment", {"consens-wikieval", "vera-squad", "correctness-squad"}),
    ]:
        registry = EntryPointRegistry[object](group, kind=kind)
        plugins = registry.plugins()
        assert names <= set(plugins), group
        assert all(plugins[n].builtin and plugins[n].distribution == "ragsense" for n in names)
        assert registry.names() == sorted(registry.names())
    assert available_backends()["fake"] == "ragsense.models._fake:create_fake_model"
    assert available_embedders()["minilm"] == available_embedders()["all-minilm-l6-v2"]
    assert set(EXPERIMENTS) >= {"consens-wikieval", "consens-faithbench", "vera-wikieval"}
    assert len(EXPERIMENTS) == len(list(EXPERIMENTS))
    with pytest.raises(KeyError):
        EXPERIMENTS["nope"]


def test_missing_metadata_says_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A source tree that was never installed has no entry points: say so instead of finding nothing.
    registry = EntryPointRegistry[object]("ragsense.models", kind="model backend")
    monkeypatch.setattr("ragsense.plugins._registry.entry_points", lambda group: metadata.EntryPoints(()))
    with pytest.raises(PluginError, match=r"no built-in model backends .* install ragsense \(pip install"):
        registry.names()
    with pytest.raises(PluginError, match="metadata is missing"):
        load_model("fake")


def test_unknown_names_list_the_registered_ones() -> None:
    with pytest.raises(ModelNotFoundError, match=r"unknown model backend 'nope' in 'nope:x'; .*fake.*openai"):
        load_model("nope:x")
    with pytest.raises(ModelNotFoundError, match=r"registered embedders: all-minilm-l6-v2, minilm"):
        load_embedder("bge")
    with pytest.raises(ParameterError, match=r"unknown metric 'consen'; .*\(did you mean 'consens'\?\)"):
        create_metric("consen")
    registry = EntryPointRegistry[object]("ragsense.experiments", kind="experiment")
    with pytest.raises(ParameterError, match=r"unknown experiment 'x'; registered experiments: consens-"):
        registry.plugin("x")


def test_unknown_options_list_the_accepted_ones() -> None:
    with pytest.raises(ParameterError, match=r"the embedder 'minilm' takes no option 'batchsize'") as info:
        load_embedder("minilm", batchsize=8)
    assert "did you mean 'batch_size'?" in str(info.value)
    assert "it accepts: model_dir, batch_size, device" in str(info.value)
    with pytest.raises(ParameterError, match=r"experiment 'consens-wikieval' takes no option 'limt'"):
        EXPERIMENTS["consens-wikieval"](model=load_model("fake"), limt=2)
    # The built-in backends take any option (one set of model options serves every backend), so the
    # check is the backend's own: the fake backend refuses what it does not know.
    with pytest.raises(TypeError, match="unknown options for the fake backend: colour"):
        load_model("fake", colour="red")


def test_accepted_options_reads_the_signature() -> None:
    def factory(model_id: str, /, size: int = 1, *, mode: str = "a") -> None: ...

    assert accepted_options(factory) == ("size", "mode")
    assert accepted_options(factory, positional=2) == ("mode",)
    assert accepted_options(lambda **kw: None) is None
    registry = EntryPointRegistry[object]("ragsense.models", kind="model backend")
    # Shared options go where taken; aimed options must be taken; aimed ones win over shared ones.
    assert registry.options("x", factory, options={"mode": "b"}, shared={"size": 2, "colour": "red"}) == {
        "size": 2,
        "mode": "b",
    }
    assert registry.options("x", factory, options={"size": 3}, shared={"size": 2}) == {"size": 3}
    with pytest.raises(ParameterError, match=r"takes no option 'colour'; it accepts: size, mode"):
        registry.options("x", factory, options={"colour": "red"})


# ------------------------------------------------------------------------------------------ plug-ins


def test_a_plugin_backend_is_found(plugin: Distribution) -> None:
    assert available_backends()["echo"] == "toyplug_mod:create_echo_model"
    assert resolve_name("echo:tiny") == ("echo", "tiny")
    model = load_model("echo:tiny", window=128)
    assert model.info.name == "tiny" and model.info.context_window == 128
    with pytest.raises(
        ParameterError, match=r"model backend 'echo' takes no option 'windw'.*it accepts: window"
    ):
        load_model("echo:tiny", windw=128)


def test_a_plugin_embedder_is_found(plugin: Distribution, tmp_path: Path) -> None:
    assert available_embedders()["letter-counts"] == "toyplug_mod:LetterCounts"
    embedder = load_embedder("Letter-Counts", letters="ab")
    assert embedder.embed(["abba", "cab"]).tolist() == [[2.0, 2.0], [1.0, 1.0]]
    assert isinstance(load_embedder("letter-counts", cache_dir=tmp_path), CachedEmbedder)


def test_a_plugin_experiment_is_found_and_runs_from_the_cli(
    plugin: Distribution, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "toy" in EXPERIMENTS and "toy" in sorted(EXPERIMENTS)
    assert EXPERIMENTS["toy"](model=load_model("fake"), limit=3) == {"model": "fake", "limit": 3, "seed": 0}
    assert main(["experiment", "toy", "--model", "fake", "--limit", "2", "--seed", "7"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"limit": 2, "model": "fake", "seed": 7}


def test_a_broken_plugin_names_itself_and_its_distribution(plugin: Distribution) -> None:
    assert {"broken", "missing", "consens"} <= set(available_metrics())  # listing imports nothing
    assert "toyplug_broken" not in sys.modules
    with pytest.raises(PluginError) as info:
        create_metric("broken")
    message = str(info.value)
    assert "the metric plug-in 'broken' (toyplug_broken:Broken, registered by toyplug" in message
    assert "RuntimeError: the plug-in needs a licence key" in message
    assert isinstance(info.value.__cause__, RuntimeError) and isinstance(info.value, ImportError)
    with pytest.raises(
        PluginError, match=r"plug-in 'missing' \(toyplug_mod:NoSuchThing, registered by toyplug"
    ):
        create_metric("missing")
    # A plug-in that does not fail stays usable beside the broken ones.
    assert create_metric("consens", model="fake").name == "consens"


def test_a_name_claimed_twice_is_an_error_naming_both(site: Distribution) -> None:
    site.install("plug-a", {"ragsense.embeddings": {"dup": "plug_a:Thing"}}, {"plug_a": "class Thing: ...\n"})
    site.install("plug-b", {"ragsense.embeddings": {"dup": "plug_b:Thing"}}, {"plug_b": "class Thing: ...\n"})
    assert "dup" in available_embedders()
    with pytest.raises(PluginError, match=r"the embedder 'dup' is registered more than once") as info:
        load_embedder("dup")
    assert "plug_a:Thing from plug-a" in str(info.value) and "plug_b:Thing from plug-b" in str(info.value)


def test_the_plugin_type_is_plain_data() -> None:
    plugin = Plugin("x", "m:f", "someone")
    assert not plugin.builtin and Plugin("x", "m:f", "ragsense").builtin


@pytest.mark.parametrize(
    "module",
    [
        "ragsense.plugins",
        "ragsense.plugins._registry",
        "ragsense.models._registry",
        "ragsense.embeddings._registry",
        "ragsense.experiments",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted >= 1 and result.failed == 0


def test_ragsense_plugins_imports_only_the_ground_floor() -> None:
    # The registry sits under every floor that uses it, so it may import nothing above errors.py.
    source = (Path(__file__).parents[2] / "src" / "ragsense" / "plugins" / "_registry.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    ragsense_imports = [line for line in imports if "ragsense" in line]
    assert ragsense_imports == ["from ragsense.errors import ParameterError, PluginError, RagsenseError"]


def test_the_examples_of_docs_extending_run(capsys: pytest.CaptureFixture[str]) -> None:
    # The page's Python blocks are self-contained: each runs as written, and its asserts hold.
    text = (Path(__file__).parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/extending.md#{i}", "exec"), {"__name__": "docs_example"})
    assert "consens: grounded +1.00" in capsys.readouterr().out
