//go:build unix && !linux

package lkserver

import "syscall"

// childAttr: without a parent-death signal, a killed Alicia leaves its
// livekit-server behind on these systems; a clean stop still ends it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
