package kstream_test

import (
	"slices"
	"sync"
)

// syncList is a string list safe for concurrent appends.
type syncList struct {
	mu sync.Mutex
	l  []string
}

func (s *syncList) add(v string) {
	s.mu.Lock()
	s.l = append(s.l, v)
	s.mu.Unlock()
}

func (s *syncList) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.l)
}

func (s *syncList) sorted() []string {
	l := s.list()
	slices.Sort(l)
	return l
}
