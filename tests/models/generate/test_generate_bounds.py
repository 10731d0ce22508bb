"""A chat template cannot take the machine's memory: every route the sandbox knows to a large
value (operators, ~, filters and methods with a size, str.format and % fields, joins, sums,
literals, nesting past Python's compile limits) is one line, and generated hostile templates,
rendered in a child whose address space is limited, each end in the one line (or their text)
with the child's memory bounded."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attncli.errors import AttnCliError
from attncli.models.generate.bounds import percent, spec_size, weight
from attncli.models.generate.chat import messages_of
from attncli.models.generate.template import TEMPLATE_LIMIT, _bounded_memory, render_template

BIG = "{% set ns = namespace(x='ab') %}{% for i in range(34) %}{% set ns.x = ns.x OP ns.x %}" \
      "{% endfor %}{{ ns.x|length }}"
# Each: a template the issue or a hostile pass found building GBs, or a route beside them.
HOSTILE = {
    "concat": BIG.replace("OP", "~"), "plus": BIG.replace("OP", "+"),
    "tojson indent": "{{ messages|tojson(indent=100000000) }}",
    "center": "{{ 'x'|center(300000000) }}", "center method": "{{ 'x'.center(300000000) }}",
    "ljust": "{{ 'x'.ljust(300000000) }}", "zfill": "{{ '1'.zfill(300000000) }}",
    "expandtabs": "{{ ('\t' * 1000).expandtabs(1000000) }}",
    "percent filter": "{{ '%1000000000s'|format('a') }}",
    "percent operator": "{{ '%1000000000s' % 'a' }}", "percent star": "{{ '%*s' % (10**9, 1) }}",
    "percent precision": "{{ '%.1000000000f' % 1.5 }}",
    "str.format": "{{ '{:>1000000000}'.format('a') }}",
    "str.format nested": "{{ '{:>{}}'.format('a', 10**9) }}",
    "str.format fields": "{{ ('{0}' * 300000).format('x' * 100000) }}",
    "format_map": "{{ '{a:>1000000000}'.format_map({'a': 1}) }}",
    "join": "{% set l = ['y' * 1000000] %}{{ (l + l + l)|join('z' * 1000000) }}",
    "join method": "{{ ('z' * 1000000).join(['a', 'b', 'c']) }}",
    "join generator": "{{ range(100000)|map('string')|join('y' * 100000) }}",
    "replace": "{{ ('x' * 1000000)|replace('x', 'y' * 1000) }}",
    "replace method": "{{ ('x' * 1000000).replace('', 'y' * 100) }}",
    "translate": "{{ ('x' * 100000).translate({120: 'y' * 1000}) }}",
    "sum of lists": "{{ range(3000)|map('string')|map('list')|list|sum(start=[])|length }}",
    "sum of numbers": "{% set n = 7 ** 300000 %}{{ ([n] * 1000)|sum }}",
    "repeated list": "{% set l = ['y' * 1000000] * 1000 %}{{ l|string|length }}",
    "list item": "{{ ['y' * 900000] * 2 }}",
    "list literal": "{% set y = 'y' * 900000 %}{{ [y, y, y, y]|string|length }}",
    "dict literal": "{% set y = 'y' * 900000 %}{{ {'a': y, 'b': y}|pprint|length }}",
    "wordwrap": "{{ ('x' * 200000)|wordwrap(1, wrapstring='y' * 100) }}",
    "indent": "{{ ('\n' * 100000)|indent('y' * 100, blank=true) }}",
    "batch": "{{ [1]|batch(100000000, 'x')|list|length }}",
    "slice": "{{ [1]|slice(100000000, 'x')|list|length }}",
    "to_bytes": "{{ (1).to_bytes(1000000000, 'big')|length }}",
    "lipsum": "{{ lipsum(n=100000000)|length }}",
    "big numbers": "{% set ns = namespace(x=2**900000) %}{% for i in range(30) %}"
    "{% set ns.x = ns.x * ns.x %}{% endfor %}{{ ns.x.bit_length() }}",
    "macro buffer": "{% macro m() %}{% for i in range(2000) %}{{ 'x' * 1000000 }}{% endfor %}"
    "{% endmacro %}{{ m()|length }}",
    "set block": "{% set s %}{% for i in range(2000) %}{{ 'x' * 1000000 }}{% endfor %}"
    "{% endset %}{{ s|length }}",
    "literal": "{{ '" + "x" * (TEMPLATE_LIMIT + 1) + "'|length }}",
    "nested ifs": "{% if 1 %}" * 400 + "x" + "{% endif %}" * 400,
    "nested fors": "{% for i in [1] %}" * 120 + "x" + "{% endfor %}" * 120,
    "nested parentheses": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_each_route_to_a_large_value_is_one_line(name: str) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(AttnCliError, match="the chat template (was stopped|is .* long)") as got:
        render_template(HOSTILE[name], messages_of("hi", None), {})
    assert "\n" not in str(got.value)
    assert resource.getrlimit(resource.RLIMIT_AS) == (soft, hard)  # the limit given back


def test_a_long_prompt_still_renders() -> None:
    """The bound grows with the messages: a template writing a 3 MB message once is fine."""
    content = "word " * 600_000
    template = "{% for m in messages %}{{ '<' + m.role + '>' ~ m.content|trim + '\n' }}" \
               "{% endfor %}{{ '%s!' % messages[-1].content[:5] }}"
    assert render_template(template, messages_of(content, None), {}) == \
        f"<user>{content.strip()}\nword !"


def test_weights_count_what_writing_out_writes() -> None:
    assert weight("abc", 100) == 3 and weight(2 ** 64, 100) == 9
    shared = ["x" * 50] * 10
    assert weight(shared, 10_000) == 11 + 500  # each copy counts: str() writes each
    assert weight([shared] * 1000, 1000) > 1000  # stops counting past the limit
    assert spec_size(">20", 10) == 20 and spec_size("0>1000.5f", 10) == 1000
    assert spec_size("1" * 40, 10) > 10
    assert percent("%5s|%.3d|%(a)s", {"a": "xy"}, 100) >= 5 + 3
    assert percent("%*s", (10 ** 9, "a"), 100) > 10 ** 9


def test_the_memory_bound_stops_an_allocation_and_is_given_back() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(MemoryError), _bounded_memory(64 << 20):
        bytearray(256 << 20)
    assert resource.getrlimit(resource.RLIMIT_AS) == (soft, hard)
    assert len(bytearray(256 << 20)) == 256 << 20


CHILD = textwrap.dedent("""
    import json, resource, sys
    from hypothesis import HealthCheck, given, settings, strategies as st
    from attncli.errors import AttnCliError
    from attncli.models.generate.template import render_template

    SEEDS = ["'x'", "'ab' * 3", "messages", "[1, 2, 3]", "range(10)|list", "2 ** 64",
             "'\\\\t\\\\n'", "dict(a='b')", "'{}%s'"]
    GROW = ["v ~ v", "v + v", "v * N", "[v] * N", "v|center(N)", "v|string", "v|list",
            "v|tojson(indent=N)", "'%Ns'|format(v)", "'%.Nd' % N", "'{:>N}'.format(v)",
            "(v|string).ljust(N)", "(v|string).zfill(N)", "(v|string).expandtabs(N)",
            "(v|string).replace('', v|string)", "[v, v]|join(v|string)",
            "v|batch(N, v)|list", "v|slice(N, v)|list", "v|indent(v|string, true, true)",
            "v|wordwrap(1, wrapstring=v|string)", "[v, v]|sum(start=[])", "[v] * N|sum",
            "lipsum(N)", "(v|string).format(v, v)", "((v|string) ~ '{0}' * N).format(v)",
            "(v|string).join([v|string] * N)", "v|pprint", "v|unique|list", "v|reverse|list"]

    template = st.builds(
        lambda seed, steps, rounds, sizes: (
            "{% set ns = namespace(v=" + seed + ") %}{% for i in range(" + str(rounds) + ") %}"
            + "".join("{% set ns.v = " + g.replace("v", "ns.v").replace("N", str(n)) + " %}"
                      for g, n in zip(steps, sizes)) + "{% endfor %}{{ ns.v }}"),
        st.sampled_from(SEEDS), st.lists(st.sampled_from(GROW), min_size=1, max_size=4),
        st.integers(1, 40), st.lists(st.sampled_from([2, 9, 1000, 10**6, 10**9]),
                                     min_size=4, max_size=4))
    outcomes = {"stopped": 0, "rendered": 0, "failed": 0}

    @settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(template)
    def check(t):
        try:
            text = render_template(t, [{"role": "user", "content": "hi"}], {})
        except AttnCliError as exc:
            assert "\\n" not in str(exc), (t, str(exc))
            outcomes["stopped" if "was stopped" in str(exc) else "failed"] += 1
            return
        assert len(text) <= 2 * 2 ** 20, t
        outcomes["rendered"] += 1

    check()
    # The child's own peak: VmHWM, not ru_maxrss, which Linux carries over exec from the forked
    # copy of its parent (a pytest worker that had loaded models: 1.8 GB before any render).
    status = open("/proc/self/status", encoding="ascii").read()
    peak_kb = int(status.split("VmHWM:")[1].split()[0])
    print(json.dumps({**outcomes, "peak_mb": peak_kb >> 10}))
""")


def test_generated_hostile_templates_end_in_one_line_with_memory_bounded() -> None:
    """Hypothesis composes growth steps (~, +, *, widths, joins, formats, sums, ...) in loops;
    the child's address space is limited to 3 GiB, its peak memory must stay under 1.5 GB."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
            + CHILD)
    done = subprocess.run([sys.executable, "-c", code, "40"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.splitlines()[-1])
    assert outcomes["stopped"] > 0 and outcomes["peak_mb"] < 1500, outcomes


@pytest.mark.parametrize("name", ["concat", "percent filter"])
def test_a_hostile_template_in_a_gguf_or_a_tokenizer_config_is_one_line(
        cli, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    """Through the command line: a GGUF's tokenizer.chat_template (a tiny Llama's, which is read
    as SmolLM2's is: rewriting the real file's 49,152-token header took 5 s of CPU a case), and a
    Llama folder's tokenizer_config.json chat_template."""
    import gguf

    from tests.gguf_fixtures import write_model
    from tests.gguf_rewrite import rewrite
    from tests.llama_fixtures import save_family

    tiny, hostile = tmp_path / "tiny.gguf", tmp_path / "hostile.gguf"
    write_model(tiny, "llama", gguf.GGMLQuantizationType.Q8_0)
    rewrite(tiny, hostile,
            {"tokenizer.chat_template": (gguf.GGUFValueType.STRING, HOSTILE[name])})
    folder = tmp_path / "llama"
    save_family(folder, "llama", seed=3)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": HOSTILE[name]}))
    for model in (hostile, folder):
        run = cli("generate", "hi", "--model", str(model), "--show-template")
        assert run.code == 2 and run.out == "", run.err
        assert run.err.startswith("attncli: error: the chat template was stopped: ")
        assert len(run.err.strip().splitlines()) == 1
