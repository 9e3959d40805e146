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
	// A backend reaped while /proc is being read would be counted twice (live, then among
	// the reaped) or not at all, a whole connection's CPU time: the sum counts only if the
	// postmaster's reaped children stayed the same from before the listing to after it.
	for attempt := 1; ; attempt++ {
		first, err := readStat(m.postmaster)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("postmaster: %w", err)
		}
		children, err := m.backends()
		if err != nil {
			return cpuTimes{}, err
		}
		var live time.Duration
		for _, cpu := range children {
			live += cpu
		}
		last, err := readStat(m.postmaster)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("postmaster: %w", err)
		}
		if first.cutime+first.cstime == last.cutime+last.cstime {
			t.server = last.utime + last.stime + last.cutime + last.cstime + live
			return t, nil
		}
		if attempt == 100 {
			return cpuTimes{}, fmt.Errorf("backends kept exiting while their CPU time was read")
		}
	}
}

// backends returns the postmaster's live children, each with the CPU time it has used so far.
func (m cpuMeter) backends() (map[int]time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int]time.Duration{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.ppid == m.postmaster {
			children[pid] = st.utime + st.stime
		} // else: gone since the listing, or not a backend
	}
	return children, nil
}

// settle waits, at most limit, until every child of the postmaster that is not in before has
// exited and been reaped. The backends of closed connections take a moment to go; while they
// go, their CPU time moves from the live backends' sum to the postmaster's reaped children's,
// so a round measured then would be charged, or credited, with another's. It reports whether
// the backends settled in time (an autovacuum worker may happen to outlive the wait).
func (m cpuMeter) settle(before map[int]time.Duration, limit time.Duration) (bool, error) {
	for deadline := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		now, err := m.backends()
		if err != nil {
			return false, err
		}
		extra := 0
		for pid := range now {
			if _, ok := before[pid]; !ok {
				extra++
			}
		}
		if extra == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
	}
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
