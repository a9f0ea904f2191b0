package main

import "fmt"

func placeholder(out string) error { return fmt.Errorf("not yet") }
