package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// cpuMeter reads how much CPU time this process and the cluster's server processes have
// used. Rates and latencies depend on what else the machine runs; CPU time per request
// much less, so the figures' details carry it as a cross-check on a busy machine.
type cpuMeter struct {
	postmaster int // pid of the cluster's postmaster
}

// newCPUMeter finds the postmaster of the cluster in dataDir from its postmaster.pid.
func newCPUMeter(dataDir string) (cpuMeter, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return cpuMeter{}, fmt.Errorf("read postmaster.pid: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line)))
	if err != nil {
		return cpuMeter{}, fmt.Errorf("postmaster.pid: %w", err)
	}
	return cpuMeter{postmaster: pid}, nil
}

// cpuTimes is CPU time used by this process and a load generator in another process (wrk),
// or by pgbench, and by the Postgres server. client is the other process's share of self,
// when there is one.
type cpuTimes struct{ self, server, client time.Duration }

// read returns the CPU time used so far by this process and by the server: the postmaster,
// its live children (the backends) and its children that have exited (reaped by it).
func (m cpuMeter) read() (cpuTimes, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}, fmt.Errorf("getrusage: %w", err)
	}
	t := cpuTimes{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return cpuTimes{}, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // gone since the listing
		}
		switch {
		case pid == m.postmaster:
			t.server += st.utime + st.stime + st.cutime + st.cstime
		case st.ppid == m.postmaster:
			t.server += st.utime + st.stime
		}
	}
	return t, nil
}

// procStat is what read needs of /proc/<pid>/stat.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime time.Duration
}

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux platform Go runs on.
const clockTick = time.Second / 100

func readStat(pid int) (procStat, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(line[i+1:])
	if len(fields) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	num := func(k int) int64 { n, _ := strconv.ParseInt(string(fields[k]), 10, 64); return n }
	// fields[0] is the state (field 3 of proc(5)); ppid is field 4, utime..cstime 14..17.
	return procStat{ppid: int(num(1)), utime: time.Duration(num(11)) * clockTick,
		stime: time.Duration(num(12)) * clockTick, cutime: time.Duration(num(13)) * clockTick,
		cstime: time.Duration(num(14)) * clockTick}, nil
}
