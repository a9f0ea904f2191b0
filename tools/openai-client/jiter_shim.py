"""A pure-Python stand-in for the jiter package (a Rust extension that PyPI
installs with openai; pyenv.sh puts this file on the path as jiter.py when
PyPI is not reachable). Only from_json, which openai's chat stream helper
calls on partial documents (partial_mode=True), written from jiter's
documented behaviour: in partial mode an unfinished value is dropped with
its key, an unfinished string too unless partial_mode is
"trailing-strings"; complete values and closed containers are kept. Not
jiter: cache_mode and catch_duplicate_keys are ignored, float_mode
"decimal" applies only outside partial mode, "lossless-float" is not
supported, and error messages differ."""

import json
from decimal import Decimal

__version__ = "0.0.0+bitdecode-shim"

_WS = " \t\r\n"


class _Incomplete(Exception):
    pass


def from_json(json_data, /, *, allow_inf_nan=True, cache_mode="all", partial_mode=False,
              catch_duplicate_keys=False, float_mode="float"):
    if isinstance(json_data, (bytes, bytearray, memoryview)):
        text = bytes(json_data).decode("utf-8")
    else:
        text = json_data
    if partial_mode in (False, "off"):
        kw = {}
        if float_mode == "decimal":
            kw["parse_float"] = Decimal
        return json.loads(text, **kw)
    if partial_mode not in (True, "on", "trailing-strings"):
        raise ValueError(f"invalid partial_mode {partial_mode!r}")
    p = _Partial(text, partial_mode == "trailing-strings")
    p.ws()
    if p.i >= len(p.s):
        raise ValueError("EOF while parsing a value at line 1 column 0")
    try:
        v = p.value()
    except _Incomplete:
        raise ValueError("EOF while parsing a value")
    p.ws()
    if p.i < len(p.s):
        raise ValueError(f"trailing characters at column {p.i + 1}")
    return v


class _Partial:
    """Parses JSON that may end anywhere: an unfinished value is dropped
    (with its key), an unfinished string too unless trailing strings are
    kept; closed containers and finished scalars are kept."""

    def __init__(self, s, trailing):
        self.s, self.i, self.trailing = s, 0, trailing
        self.dec = json.JSONDecoder()

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in _WS:
            self.i += 1

    def eof(self):
        return self.i >= len(self.s)

    def value(self):
        self.ws()
        if self.eof():
            raise _Incomplete
        c = self.s[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            return self.string()
        for lit, v in (("true", True), ("false", False), ("null", None), ("NaN", float("nan")),
                       ("Infinity", float("inf")), ("-Infinity", float("-inf"))):
            if self.s.startswith(lit, self.i):
                self.i += len(lit)
                return v
            if lit.startswith(self.s[self.i:]):
                raise _Incomplete
        return self.number()

    def number(self):
        j = self.i
        while j < len(self.s) and self.s[j] in "+-0123456789.eE":
            j += 1
        tok = self.s[self.i:j]
        if j == len(self.s):
            # May be cut off: keep what parses as a complete number.
            tok = tok.rstrip("+-.eE")
            if not tok or tok == "-":
                raise _Incomplete
        try:
            v = json.loads(tok)
        except ValueError:
            raise ValueError(f"invalid number at column {self.i + 1}")
        self.i = j
        return v

    def string(self):
        try:
            v, end = json.decoder.scanstring(self.s, self.i + 1)
        except json.JSONDecodeError as e:
            if "Unterminated string" not in e.msg and not (self.trailing and "escape" in e.msg.lower()):
                raise ValueError(e.msg)
            if not self.trailing:
                raise _Incomplete
            # Keep the text up to the cut (an escape cut in half dropped).
            body = self.s[self.i + 1:]
            for cut in range(len(body), -1, -1):
                try:
                    v, _ = json.decoder.scanstring(body[:cut] + '"', 0)
                    self.i = len(self.s)
                    return v
                except json.JSONDecodeError:
                    continue
            raise _Incomplete
        self.i = end
        return v

    def obj(self):
        self.i += 1
        out = {}
        self.ws()
        if not self.eof() and self.s[self.i] == "}":
            self.i += 1
            return out
        while True:
            self.ws()
            if self.eof():
                return out
            if self.s[self.i] != '"':
                raise ValueError(f"expected a key at column {self.i + 1}")
            try:
                k = self.string_key()
            except _Incomplete:
                self.i = len(self.s)
                return out
            self.ws()
            if self.eof():
                return out
            if self.s[self.i] != ":":
                raise ValueError(f"expected ':' at column {self.i + 1}")
            self.i += 1
            try:
                v = self.value()
            except _Incomplete:
                self.i = len(self.s)
                return out
            out[k] = v
            if self.eof():
                return out
            self.ws()
            if self.eof():
                return out
            c = self.s[self.i]
            self.i += 1
            if c == "}":
                return out
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at column {self.i}")

    def string_key(self):
        try:
            k, end = json.decoder.scanstring(self.s, self.i + 1)
        except json.JSONDecodeError as e:
            if "Unterminated string" in e.msg:
                raise _Incomplete
            raise ValueError(e.msg)
        self.i = end
        return k

    def arr(self):
        self.i += 1
        out = []
        self.ws()
        if not self.eof() and self.s[self.i] == "]":
            self.i += 1
            return out
        while True:
            try:
                v = self.value()
            except _Incomplete:
                self.i = len(self.s)
                return out
            out.append(v)
            self.ws()
            if self.eof():
                return out
            c = self.s[self.i]
            self.i += 1
            if c == "]":
                return out
            if c != ",":
                raise ValueError(f"expected ',' or ']' at column {self.i}")


def cache_clear():
    pass


def cache_usage():
    return 0
