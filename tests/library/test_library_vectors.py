"""The library's vectors: the embedded model finds passages by meaning with no key and no
network; a provider's embeddings are used where the session's credential has them (through the
official SDKs, against the emulator), the embedded model's when they fail; full text and
vectors are fused by rank; a short passage is read, cited and checked with its neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from apps.chat.display.citations import cited_markdown
from apps.chat.records.sessions import session_create, session_set_provider
from apps.library import minilm
from apps.library.models import Chunk, Document
from apps.library.search import library_search
from apps.library.services import document_create, document_index
from apps.library.vectors import LOCAL, MATRICES
from apps.providers.services import credential_save

pytestmark = pytest.mark.django_db

MANUAL = """# Boiler manual

## Safety

Switch off the gas supply before you open the casing. Only a registered engineer may service
the burner.

## Pressure

The gauge should read between one and one and a half bar when the system is cold. Top it up
through the filling loop under the boiler until the needle is in the green band.

## Error codes

Code F28 means the boiler failed to ignite. Check that the gas meter is on, then press reset
and wait five minutes.
"""


def _indexed(session, user, name: str, text: str) -> Document:
    data = text.encode()
    return document_index(
        document=document_create(session=session, by=user, name=name, data=data), data=data
    )


def test_the_embedded_model_puts_texts_that_mean_the_same_together():
    cat, kitten, markets = minilm.encode(
        ["The cat sat on the mat.", "A kitten rests on a rug.", "Stock markets fell on Tuesday."]
    )
    assert cat.dtype == np.float32 and cat.shape == (minilm.DIMENSIONS,)
    assert abs(float(np.linalg.norm(cat)) - 1.0) < 1e-4
    assert float(cat @ kitten) > 0.5 > 0.1 > float(cat @ markets)
    # Batched, sorted by length and padded, a text's vector is the one it has alone.
    long = "Boats moor at the north quay when the spring tide turns. " * 30
    together = minilm.encode(["tide", long, "quay"])
    assert np.allclose(together[1], minilm.encode([long])[0], atol=1e-5)
    assert np.allclose(together[0], minilm.encode(["tide"])[0], atol=1e-5)


def test_a_question_in_other_words_is_found_by_meaning_with_no_key(alice, roles):
    session = session_create(owner=alice, name="Home", roles=roles)  # the demo: no key
    manual = _indexed(session, alice, "boiler.md", MANUAL)
    assert manual.embedder == LOCAL and manual.vectors_done == manual.chunks_count == 3
    assert all(len(bytes(c.vector)) == 4 * 384 for c in Chunk.objects.filter(document=manual))
    question = "What is wrong when the heater will not light?"  # no word of the passage
    assert library_search(session=session, question=question, vectors=False) == []
    hits = library_search(session=session, question=question)
    assert hits[0].chunk.heading == "Boiler manual > Error codes"
    # Fused: a question both engines answer ranks the passage both put first, first.
    both = library_search(session=session, question="how much pressure on the gauge when cold")
    assert both[0].chunk.heading == "Boiler manual > Pressure"
    # Nothing on the question: nothing, not the nearest of the unrelated.
    assert library_search(session=session, question="helicopter rotor blades") == []


def test_a_providers_embeddings_are_used_where_the_session_has_them(alice, roles, emulator):
    for provider, path, model, embedder in (
        ("openai", "/v1", "gpt-4.1", "openai:text-embedding-3-small"),
        ("gemini", "", "gemini-2.5-flash", "gemini:gemini-embedding-001"),
        ("ollama", "/v1", "llama3.1", "ollama:nomic-embed-text"),
    ):
        emulator.reset()
        credential = credential_save(
            owner=alice, name=f"Emulated {provider}", provider=provider,
            base_url=emulator.url + path, api_key="sk-test-key-0000",
        )  # fmt: skip
        session = session_create(owner=alice, name=provider, roles=roles)
        session_set_provider(session=session, credential=credential, model=model)
        manual = _indexed(session, alice, "boiler.md", MANUAL)
        assert (manual.embedder, manual.vectors_done, manual.vectors_note) == (embedder, 3, "")
        passages = [body for _, body, _ in emulator.embedding_requests]
        assert "Code F28" in str(passages[0]) and len(emulator.embedding_requests) == 1
        hits = library_search(session=session, question="pressure filling loop needle")
        assert hits[0].chunk.heading == "Boiler manual > Pressure"
        assert len(emulator.embedding_requests) == 2  # the question, by the same model


def test_a_failing_provider_leaves_the_embedded_models_vectors_and_says_why(alice, roles, emulator):
    emulator.embedding_models.discard("text-embedding-3-small")
    try:
        credential = credential_save(
            owner=alice, name="Emulated OpenAI", provider="openai",
            base_url=emulator.url + "/v1", api_key="sk-test-key-0000",
        )  # fmt: skip
        session = session_create(owner=alice, name="Home", roles=roles)
        session_set_provider(session=session, credential=credential, model="gpt-4.1")
        manual = _indexed(session, alice, "boiler.md", MANUAL)
    finally:
        emulator.embedding_models.add("text-embedding-3-small")
    assert manual.embedder == LOCAL and manual.vectors_done == 3
    assert "openai:text-embedding-3-small failed" in manual.vectors_note
    assert "sk-test-key" not in manual.vectors_note
    question = "What is wrong when the heater will not light?"
    assert library_search(session=session, question=question)[0].chunk.heading.endswith("codes")


def test_vectors_follow_a_reading_again_and_a_removal(alice, roles):
    session = session_create(owner=alice, name="Home", roles=roles)
    manual = _indexed(session, alice, "boiler.md", MANUAL)
    question = "What is wrong when the heater will not light?"
    assert library_search(session=session, question=question)
    document_index(document=manual, data=b"# Garden\n\nWater the roses at dusk.")
    hits = library_search(session=session, question=question)
    assert all(hit.chunk.document_id == manual.pk and "roses" in hit.text for hit in hits)
    manual.delete()
    assert library_search(session=session, question=question) == []
    MATRICES.clear()


def test_a_short_passage_is_read_cited_and_checked_with_its_neighbours(alice, roles):
    session = session_create(owner=alice, name="Home", roles=roles)
    long = " ".join(f"Line {n} of the boiler log records a steady flame." for n in range(18))
    text = f"# Log\n\n{long}\n\nThe flame went out at noon on Sunday.\n\n# Other\n\nUnrelated."
    log = _indexed(session, alice, "log.md", text)
    first, short, other = Chunk.objects.filter(document=log).order_by("seq")
    assert short.text == "The flame went out at noon on Sunday." and other.heading == "Other"
    hits = library_search(session=session, question="When did the flame go out on Sunday?")
    assert hits[0].chunk == short
    assert hits[0].text == f"{first.text}\n\n{short.text}"  # the same heading only
    assert all(hit.chunk != first for hit in hits)  # read once, as the short one's context
    # A quotation from the neighbour, cited by the short passage's mark, is in what was read.
    reply = f'The log says "Line 3 of the boiler log records a steady flame." [L{short.pk}]'
    _, checks = cited_markdown(reply, session_id=session.pk)
    assert checks and checks[0].verified
