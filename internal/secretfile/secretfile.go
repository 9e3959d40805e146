// Package secretfile reads the small files that hold secrets, such as tokens, at paths that
// an operator or a mounted volume controls: only regular files, without blocking, and only
// up to a size.
package secretfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read returns the content of the regular file at path (after symbolic links, which a
// mounted Secret's files are), refusing it when it holds more than max bytes. It opens the
// file without blocking and refuses anything but a regular file: opening a FIFO for reading
// would otherwise wait for a writer, and so would every caller. Its errors never quote the
// content.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s): give the path of a file", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("the file is larger than %d bytes", max)
	}
	return b, nil
}
