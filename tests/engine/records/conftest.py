"""Tests of ``twinlog.engine.records``: the batch format, builder, the one record decoder,
codecs and varints; pinned bytes and CRCs, hypothesis round trips and damaged inputs."""
