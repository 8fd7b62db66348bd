"""Shared by tools/fuzz/diff_*.py: builds a driver (tools/fuzz/NAME.c) against the Release build's libverlc.a with the
libraries the verlc program links (read from Ninja's link command), into /tmp/vc_NAME; returns its path."""
import os, subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_driver(name, out=None):
    build = os.path.join(ROOT, "build")
    link = subprocess.run(["ninja", "-C", build, "-t", "commands", "verlc"], capture_output=True, text=True,
                          check=True).stdout.strip().split("\n")[-1]
    libs = link.split(" -o verlc ")[1].split("&&")[0].replace("libverlc.a", os.path.join(build, "libverlc.a"))
    out = out or f"/tmp/vc_{name}"
    subprocess.run(f"gcc -O1 -I{ROOT}/include -I{ROOT}/src {ROOT}/tools/fuzz/{name}.c {libs} -lpthread -lstdc++ -o {out}",
                   shell=True, check=True)
    return out
