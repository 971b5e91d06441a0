package dram

import (
	"bytes"
	"context"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestFileRange checks that a Ref's file range holds the block's bytes, and
// that pages handed to sendfile (FileRange called) are punched out of the
// memory file when the block is freed, while pages never sent are left as
// they are (freeing them costs nothing).
func TestFileRange(t *testing.T) {
	cases := []struct {
		name string
		sent bool
	}{{"sent with sendfile", true}, {"never sent", false}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTier(t, 1<<20)
			data := payload(uint64(i), 3*PageSize+17)
			if err := put(t, tr, key(i), data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			ref, err := tr.Get(context.Background(), key(i), block.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fd, off := tr.fd, int64(uintptr(unsafe.Pointer(&ref.Data[0]))-uintptr(unsafe.Pointer(&tr.arena[0])))
			if tc.sent {
				var ok bool
				if fd, off, ok = ref.FileRange(); !ok {
					t.Fatal("a DRAM ref has no file range")
				}
			}
			got := make([]byte, len(data))
			if _, err := unix.Pread(fd, got, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("the file range does not hold the block's bytes")
			}
			ref.Release()
			if err := tr.Delete(context.Background(), key(i)); err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Pread(fd, got, off); err != nil {
				t.Fatal(err)
			}
			zero := bytes.Count(got, []byte{0}) == len(got)
			if zero != tc.sent {
				t.Fatalf("after free: pages zero (punched) = %v, want %v", zero, tc.sent)
			}
		})
	}
}

// TestGetAllocatesOnlyTheRef checks that a verified read and its release
// allocate one object, the Ref (the lease and the sendfile mark go through
// the tier as the Ref's block.Lessor, not through closures), and that the
// lease still holds the block while the Ref is out.
func TestGetAllocatesOnlyTheRef(t *testing.T) {
	tr := newTier(t, 1<<20)
	data := payload(1, 1024)
	if err := put(t, tr, key(1), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		ref, err := tr.Get(ctx, key(1), block.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref.Release()
	})
	if allocs > 1 {
		t.Fatalf("a DRAM Get and Release allocate %.1f objects, want 1 (the Ref)", allocs)
	}
	ref, err := tr.Get(ctx, key(1), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Delete(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ref.Data, data) {
		t.Fatal("a leased block's bytes changed after Delete")
	}
	ref.Release()
	ref.Release() // a second Release must not end another lease
	if _, err := tr.Get(ctx, key(1), block.GetOptions{}); err == nil {
		t.Fatal("the deleted block is still readable after its lease ended")
	}
}

// TestLeaseEndingAfterCloseTouchesNoOtherFile checks that a lease on a block
// sent with sendfile that ends after Close does not punch pages out of the
// file its old descriptor number now names: Close closed the memory file, so
// the number may have been reused by any other open file of the process.
func TestLeaseEndingAfterCloseTouchesNoOtherFile(t *testing.T) {
	tr := newTier(t, 1<<20)
	data := payload(9, 3*PageSize+17)
	if err := put(t, tr, key(9), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	ref, err := tr.Get(context.Background(), key(9), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldFD, off, ok := ref.FileRange() // marks the pages as sent
	if !ok {
		t.Fatal("a DRAM ref has no file range")
	}
	if err := tr.Delete(context.Background(), key(9)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	// Another file takes the old descriptor number, as the next open of
	// the process would.
	other, err := os.CreateTemp(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	content := bytes.Repeat([]byte{0xA5}, int(off)+len(data)+PageSize)
	if _, err := other.Write(content); err != nil {
		t.Fatal(err)
	}
	if int(other.Fd()) != oldFD { // the open did not reuse the number itself
		if err := unix.Dup2(int(other.Fd()), oldFD); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(oldFD)
	}
	ref.Release() // the last lease on the deleted block
	got := make([]byte, len(content))
	if _, err := unix.Pread(int(other.Fd()), got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("the file now under the old descriptor number lost %d bytes to a punch", len(content)-bytes.Count(got, []byte{0xA5}))
	}
}

// TestDescriptorDoesNotMarkPagesSent checks that taking a descriptor (a
// co-located reader copies the bytes itself) does not count as a sendfile:
// the block's pages are freed in place, not punched out of the memory file.
func TestDescriptorDoesNotMarkPagesSent(t *testing.T) {
	tr := newTier(t, 1<<20)
	data := payload(11, 3*PageSize+17)
	if err := put(t, tr, key(11), data, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	d, release, err := tr.Descriptor(context.Background(), key(11))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := unix.Pread(tr.fd, got, d.Offset); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the descriptor's range does not hold the block (err %v)", err)
	}
	release()
	if err := tr.Delete(context.Background(), key(11)); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pread(tr.fd, got, d.Offset); err != nil {
		t.Fatal(err)
	}
	if bytes.Count(got, []byte{0}) == len(got) {
		t.Fatal("a descriptor read punched the block's pages out of the memory file when it was freed")
	}
}
