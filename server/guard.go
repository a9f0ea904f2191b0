package server

import (
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// guard wraps the API with the checks every request passes before a
// handler sees it, in this order: the Host allow-list (DNS rebinding), the
// Origin allow-list and CORS (cross-site use from a browser), the API key,
// and, for POST, a JSON Content-Type (a cross-site HTML form or a
// text/plain fetch cannot send one without a CORS preflight, which the
// Origin check refuses).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeError(w, &apiError{Status: http.StatusMisdirectedRequest, Message: "This server does not serve host " + r.Host + " (see --allowed-hosts).",
				Type: "invalid_request_error", Code: strp("host_not_allowed")})
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if !s.originAllowed(origin) {
				writeError(w, &apiError{Status: http.StatusForbidden, Message: "Cross-origin requests from " + origin + " are not allowed (see --cors-origins).",
					Type: "invalid_request_error", Code: strp("origin_not_allowed")})
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			// What the official clients read beyond the safelisted headers.
			h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				// The headers the page asks to send (the official JS client
				// sends X-Stainless-* and OpenAI-Organization), as vLLM's CORS
				// allows any: the origin is trusted.
				allow := "Authorization, Content-Type"
				if asked := r.Header.Get("Access-Control-Request-Headers"); headerList(asked) {
					allow = asked
				}
				h.Set("Access-Control-Allow-Headers", allow)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		public := r.URL.Path == "/health" || r.URL.Path == "/metrics"
		if s.cfg.APIKey != "" && (!public || s.cfg.AuthAll) && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bitdecode"`)
			writeError(w, &apiError{Status: http.StatusUnauthorized, Message: "Incorrect or missing API key: send it as 'Authorization: Bearer KEY'.",
				Type: "invalid_request_error", Code: strp("invalid_api_key")})
			return
		}
		if r.Method == http.MethodPost && !jsonContentType(r.Header.Get("Content-Type")) {
			writeError(w, &apiError{Status: http.StatusUnsupportedMediaType, Message: "Send the request body as JSON with 'Content-Type: application/json'.",
				Type: "invalid_request_error", Code: strp("unsupported_media_type")})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the API key, compared in constant
// time.
func (s *Server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.cfg.APIKey)) == 1
}

// hostAllowed checks a Host header against AllowedHosts (empty: any).
func (s *Server) hostAllowed(host string) bool {
	if len(s.cfg.AllowedHosts) == 0 {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	for _, a := range s.cfg.AllowedHosts {
		if a == "*" || strings.EqualFold(a, host) || strings.EqualFold(strings.Trim(a, "[]"), name) {
			return true
		}
	}
	return false
}

// originAllowed checks an Origin header against CORSOrigins.
func (s *Server) originAllowed(origin string) bool {
	return slices.Contains(s.cfg.CORSOrigins, "*") || slices.ContainsFunc(s.cfg.CORSOrigins, func(o string) bool { return strings.EqualFold(o, origin) })
}

// headerList reports whether s is a comma-separated list of header names.
func headerList(s string) bool {
	if len(s) > 4096 {
		return false
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return false
		}
		for _, c := range []byte(name) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
				return false
			}
		}
	}
	return true
}

// jsonContentType reports whether a Content-Type is JSON.
func jsonContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// LoopbackHosts are the Host names of a server reached on this machine, the
// default allow-list of a server bound to a loopback address.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// setWriteDeadline bounds the writing of a non-streamed response.
func (s *Server) setWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
}
