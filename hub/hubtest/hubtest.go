// Package hubtest serves model repositories the way the Hugging Face Hub
// does for package hub (its model API's revision answer and the files'
// resolve URLs, with HTTP Range), for tests that must not reach the network.
package hubtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Repo is one repository at one commit.
type Repo struct {
	Name  string            // "org/name"
	SHA   string            // the commit every revision resolves to
	Files map[string][]byte // by path in the repository
}

// Server is a stand-in for the Hub: hub.Options.Endpoint = Server.URL.
type Server struct {
	*httptest.Server
	// Token, when set, is the bearer token every request must carry (a
	// gated repository): others get 401. Change it with Edit once requests
	// are made.
	Token string

	mu       sync.Mutex
	repos    map[string]*Repo
	requests int
	ranges   []string
}

// New starts a Server for repos; the caller closes it.
func New(repos ...*Repo) *Server {
	s := &Server{repos: map[string]*Repo{}}
	for _, r := range repos {
		s.repos[r.Name] = r
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests is how many requests the server has answered.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Ranges returns the Range headers the server was sent, in order.
func (s *Server) Ranges() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// Edit runs f, which may change the repositories' files or the token,
// while no request is being answered.
func (s *Server) Edit(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if rg := r.Header.Get("Range"); rg != "" {
		s.ranges = append(s.ranges, rg)
	}
	if s.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.Token {
		http.Error(w, `{"error":"Access to model is restricted."}`, http.StatusUnauthorized)
		return
	}
	for _, repo := range s.repos {
		api := "/api/models/" + repo.Name + "/revision/"
		res := "/" + repo.Name + "/resolve/" + repo.SHA + "/"
		switch {
		case strings.HasPrefix(r.URL.Path, api):
			var sib []map[string]string
			for name := range repo.Files {
				sib = append(sib, map[string]string{"rfilename": name})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"id": repo.Name, "sha": repo.SHA, "siblings": sib})
			return
		case strings.HasPrefix(r.URL.Path, res):
			b, ok := repo.Files[strings.TrimPrefix(r.URL.Path, res)]
			if !ok {
				http.NotFound(w, r)
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
			return
		}
	}
	http.NotFound(w, r)
}
