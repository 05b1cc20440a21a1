#!/usr/bin/env python3
"""Writes k8s-v1.32.fds: the FileDescriptorSet of upstream Kubernetes' protobuf API types.

Upstream compiles every `generated.proto` of k8s.io/api, k8s.io/apimachinery and k8s.io/metrics
into its Go code as a gzipped FileDescriptorProto (the gogo-protobuf registration of each
generated.pb.go), so any binary built from those modules carries them verbatim. This script takes
them from kubectl v1.32 and writes them, unchanged and sorted by file name, as a
FileDescriptorSet (field 1, repeated). Run by hand when the supported version moves:

    python3 apiserver/proto/extract.py /usr/bin/kubectl apiserver/proto/k8s-v1.32.fds
"""
import json
import re
import subprocess
import sys
import zlib

GZIP_MEMBER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # as Go's compress/gzip writes it


def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def descriptors(binary):
    for m in re.finditer(re.escape(GZIP_MEMBER), binary):
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(binary[m.start():])
        except zlib.error:
            continue
        # FileDescriptorProto starts with field 1 (name): tag 0x0a, length, "k8s.io/.../generated.proto".
        if raw[:1] == b"\n" and raw[2:2 + raw[1]].startswith(b"k8s.io/") and raw[2:2 + raw[1]].endswith(b".proto"):
            yield raw[2:2 + raw[1]].decode(), raw


def main(kubectl, out):
    version = json.loads(subprocess.run([kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True, check=True).stdout)
    git_version = version["clientVersion"]["gitVersion"]
    if not git_version.startswith("v1.32."):
        sys.exit(f"{kubectl} is {git_version}, not v1.32")
    files = dict(descriptors(open(kubectl, "rb").read()))
    with open(out, "wb") as f:
        for name in sorted(files):
            f.write(b"\n" + varint(len(files[name])) + files[name])
    print(f"{len(files)} files from kubectl {git_version} -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
