#!/usr/bin/env python3
"""Write an OCI image archive (oci-layout + index.json + blobs) holding ONE static binary at /<name>.
usage: oci-archive.py [--dir DIR] [--link NAME]... IMAGE_REF BINARY OUT.tar [ENTRYPOINT...]
IMAGE_REF like localhost/rg/pause:1. Deterministic (mtime 0, uid 0).
--dir DIR puts the binary at /DIR/<name> (PATH=/DIR:/); each --link NAME adds /DIR/NAME, a symlink
to it (a multi-call binary's applets, e.g. busybox's sh, cat, sleep)."""
import gzip, hashlib, io, json, os, sys, tarfile

args, bin_dir, links = sys.argv[1:], "", []
while args and args[0] in ("--dir", "--link"):
    if len(args) < 2:
        sys.exit("oci-archive.py: %s needs a value" % args[0])
    if args[0] == "--dir":
        bin_dir = args[1].strip("/")
    else:
        links.append(args[1])
    args = args[2:]
if len(args) < 3:
    sys.exit(__doc__)
ref, binary, out = args[:3]
prefix = bin_dir + "/" if bin_dir else ""
entry = args[3:] or ["/" + prefix + os.path.basename(binary)]
tag = ref.rsplit(":", 1)[1]

def tarinfo(name, size=0, mode=0o755, kind=tarfile.REGTYPE):
    ti = tarfile.TarInfo(name); ti.size = size; ti.mode = mode; ti.type = kind
    ti.mtime = 0; ti.uid = ti.gid = 0; ti.uname = ti.gname = "root"
    return ti

# layer: the binary plus empty dirs the runtime likes to find
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
    for d in ("dev", "proc", "sys", "etc", "tmp") + ((bin_dir,) if bin_dir else ()):
        t.addfile(tarinfo(d + "/", mode=0o755 if d != "tmp" else 0o1777, kind=tarfile.DIRTYPE))
    for f, content in (("etc/passwd", b"root:x:0:0:root:/:/pause\n"), ("etc/group", b"root:x:0:\n")):
        t.addfile(tarinfo(f, len(content), 0o644), io.BytesIO(content))
    data = open(binary, "rb").read()
    t.addfile(tarinfo(prefix + os.path.basename(binary), len(data)), io.BytesIO(data))
    for name in sorted(set(links) - {os.path.basename(binary)}):
        ti = tarinfo(prefix + name, kind=tarfile.SYMTYPE)
        ti.linkname = os.path.basename(binary)
        t.addfile(ti)
layer_tar = raw.getvalue()
diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
gz = io.BytesIO()
with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as g:
    g.write(layer_tar)
layer = gz.getvalue()

blobs = {}
def blob(b):
    d = hashlib.sha256(b).hexdigest(); blobs[d] = b
    return {"digest": "sha256:" + d, "size": len(b)}

lay = blob(layer)
config = json.dumps({
    "created": "1970-01-01T00:00:00Z", "architecture": "amd64", "os": "linux",
    "config": {"Entrypoint": entry, "Env": ["PATH=" + ("/" + bin_dir + ":/" if bin_dir else "/")], "WorkingDir": "/", "StopSignal": "SIGTERM"},
    "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "oci-archive.py"}],
}, sort_keys=True).encode()
cfg = blob(config)
manifest = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": dict(mediaType="application/vnd.oci.image.config.v1+json", **cfg),
    "layers": [dict(mediaType="application/vnd.oci.image.layer.v1.tar+gzip", **lay)],
}, sort_keys=True).encode()
man = blob(manifest)
index = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [dict(mediaType="application/vnd.oci.image.manifest.v1+json", **man,
                       platform={"architecture": "amd64", "os": "linux"},
                       annotations={"io.containerd.image.name": ref,
                                    "org.opencontainers.image.ref.name": tag})],
}, sort_keys=True).encode()

with tarfile.open(out, "w") as t:
    def add(name, b, mode=0o644):
        t.addfile(tarinfo(name, len(b), mode), io.BytesIO(b))
    add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    add("index.json", index)
    t.addfile(tarinfo("blobs/", mode=0o755, kind=tarfile.DIRTYPE))
    t.addfile(tarinfo("blobs/sha256/", mode=0o755, kind=tarfile.DIRTYPE))
    for d, b in blobs.items():
        add("blobs/sha256/" + d, b)
print(out, ref, "manifest", man["digest"])
