"""Render chat templates and Jinja constructs with transformers, as reference.

usage: python3 render_hf.py TEMPLATES_DIR CASES.json CONSTRUCTS.json OUT.json

Each *.jinja template in TEMPLATES_DIR is rendered over each conversation of
CASES.json with transformers' own renderer (render_jinja_template, which
compiles the template exactly as apply_chat_template does: a sandboxed
jinja2 environment with trim_blocks, lstrip_blocks, loop controls, HF's
tojson, raise_exception and strftime_now). Each construct of CONSTRUCTS.json
is compiled with the same environment and rendered with its variables.
strftime_now sees the fixed clock 2026-11-26 12:34:56 on both sides.
"""

import datetime as _dt
import glob
import json
import os
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

FIXED = _dt.datetime(2026, 11, 26, 12, 34, 56)


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED


# strftime_now calls datetime.now(); the module imports either the class or
# the module.
if isinstance(getattr(ctu, "datetime", None), type):
    ctu.datetime = _FixedDatetime
else:
    class _Mod:
        datetime = _FixedDatetime
    ctu.datetime = _Mod

SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def err_text(e):
    return "%s: %s" % (type(e).__name__, e)


def render_case(src, c, kwargs):
    rendered, _ = ctu.render_jinja_template(
        conversations=[c["messages"]], tools=c.get("tools"), documents=c.get("documents"),
        chat_template=src, add_generation_prompt=c.get("add_generation_prompt", False), **kwargs)
    return rendered[0]


def main():
    tdir, cases_path, constructs_path, out_path = sys.argv[1:5]
    import inspect
    print("render_jinja_template", inspect.signature(ctu.render_jinja_template))
    for name in ("_compile_jinja_template", "_cached_compile_jinja_template"):
        if hasattr(ctu, name):
            print(inspect.getsource(getattr(ctu, name)))
    cases = json.load(open(cases_path))
    constructs = json.load(open(constructs_path))
    out = {"versions": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
           "templates": {}, "constructs": {}}
    for path in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
        name = os.path.basename(path)
        src = open(path, encoding="utf-8").read()
        res = {}
        for c in cases:
            kwargs = dict(SPECIAL)
            kwargs.update(c.get("kwargs", {}))
            try:
                res[c["name"]] = {"out": render_case(src, c, kwargs)}
            except Exception as e:  # noqa: BLE001 - recorded as the reference's error
                res[c["name"]] = {"err": err_text(e)}
        out["templates"][name] = res
    for c in constructs:
        try:
            tmpl = ctu._compile_jinja_template(c["template"])
            out["constructs"][c["name"]] = {"out": tmpl.render(**c["vars"])}
        except Exception as e:  # noqa: BLE001
            out["constructs"][c["name"]] = {"err": err_text(e)}
    json.dump(out, open(out_path, "w"), ensure_ascii=False, indent=1)
    print("rendered", len(out["templates"]), "templates,", len(out["constructs"]), "constructs")


if __name__ == "__main__":
    main()
