"""Run with BuildGrid's own interpreter: `python reapi_probe.py PORT INSTANCE`. One round trip of the REAPI
calls Pants' remote cache makes (the CAS's batch upload, missing-blob lookup and batch read; the action
cache's update and lookup) against a server; prints `ok`, or fails with what differed."""

from __future__ import annotations

import hashlib
import sys

# BuildGrid's own packages: this runs under its interpreter, never under Pants' resolves.
import grpc  # pants: no-infer-dep
import buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2 as re_pb2  # pants: no-infer-dep
import buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2_grpc as re_grpc  # pants: no-infer-dep


def digest(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def main(port: str, instance: str) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    cas = re_grpc.ContentAddressableStorageStub(channel)
    actions = re_grpc.ActionCacheStub(channel)
    blob = b"epoch_gate's probe of the remote cache\n"
    stored = digest(blob)
    request = re_pb2.BatchUpdateBlobsRequest.Request(digest=stored, data=blob)
    updated = cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(instance_name=instance, requests=[request]))
    assert [r.status.code for r in updated.responses] == [0], updated
    missing = cas.FindMissingBlobs(re_pb2.FindMissingBlobsRequest(instance_name=instance, blob_digests=[stored]))
    assert list(missing.missing_blob_digests) == [], missing
    read = cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(instance_name=instance, digests=[stored]))
    assert [r.data for r in read.responses] == [blob], read

    action = digest(b"an action no one runs")
    result = re_pb2.ActionResult(exit_code=0, stdout_digest=stored)
    actions.UpdateActionResult(
        re_pb2.UpdateActionResultRequest(instance_name=instance, action_digest=action, action_result=result)
    )
    found = actions.GetActionResult(re_pb2.GetActionResultRequest(instance_name=instance, action_digest=action))
    assert found.stdout_digest == stored and found.exit_code == 0, found
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:])
