"""A run's report parts: a phase whose events the network delivered together has its low ITL
explained, and only such a phase."""

from types import SimpleNamespace

from dashboards.formats.run_parts import batched_notes
from llmchaos.run import Reads
from llmchaos.run.schema import PhaseReads


def test_a_phase_whose_reads_the_network_batched_has_its_itl_explained():
    reads = Reads(
        reads=1200,
        coalesced=130,
        late=30,
        phases=(
            PhaseReads(phase="baseline", reads=1000, coalesced=40, late=30),  # 1 % the network's: nothing to say
            PhaseReads(phase="bandwidth-200kbit", reads=200, coalesced=90, late=0),
        ),
    )
    (note,) = batched_notes(SimpleNamespace(run=SimpleNamespace(reads=reads)))  # type: ignore[arg-type]
    assert note.startswith(
        "ITL in bandwidth-200kbit: 45% of its stream reads brought several events the network delivered together"
    )
    assert "the network's batching, not a fast server" in note
