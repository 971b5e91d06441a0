package validation

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		want    []Arg
		wantErr error
	}{
		{[]string{"--data-dir", "/data", "-listen=0.0.0.0:7400"}, []Arg{{"data-dir", "/data"}, {"listen", "0.0.0.0:7400"}}, nil},
		{[]string{"--s3-tls", "--join=a:1,b:2"}, []Arg{{"s3-tls", "true"}, {"join", "a:1,b:2"}}, nil},
		{[]string{"--s3-tls=false"}, []Arg{{"s3-tls", "false"}}, nil},
		{[]string{"--raft-port=7402"}, nil, ErrUnknownSetting},
		{[]string{"--listen"}, nil, ErrBadArgs},
		{[]string{"serve"}, nil, ErrBadArgs},
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.args)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("ParseArgs(%q): err %v, want %v", tt.args, err, tt.wantErr)
			continue
		}
		if tt.wantErr == nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseArgs(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestEffectivePrecedence(t *testing.T) {
	eff, err := Effective(
		map[string]string{"dram_capacity": "1GiB", "log_level": "debug", "zone": "file"},
		map[string]string{"CTXD_DRAM_CAPACITY": "2GiB", "CTXD_ZONE": "env", "HOME": "/"},
		[]Arg{{"zone", "flag1"}, {"zone", "flag2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dram-capacity": "2GiB", "log-level": "debug", "zone": "flag2"}
	if !reflect.DeepEqual(eff, want) {
		t.Errorf("Effective = %v, want %v", eff, want)
	}
	if _, err := Effective(map[string]string{"dram-capacity": "1GiB"}, nil, nil); !errors.Is(err, ErrUnknownSetting) {
		t.Errorf("file key with '-': err %v, want ErrUnknownSetting", err)
	}
	if _, err := Effective(map[string]string{"config": "x"}, nil, nil); !errors.Is(err, ErrUnknownSetting) {
		t.Errorf("config key in a config file: err %v, want ErrUnknownSetting", err)
	}
	if _, err := Effective(nil, map[string]string{"CTXD_DRAM_SIZE": "1"}, nil); !errors.Is(err, ErrUnknownSetting) {
		t.Errorf("unknown CTXD_ variable: err %v, want ErrUnknownSetting", err)
	}
}

func TestListenPort(t *testing.T) {
	tests := []struct {
		addr string
		port int
		ok   bool
	}{
		{"0.0.0.0:7401", 7401, true},
		{":7400", 7400, true},
		{"[::]:7402", 7402, true},
		{"127.0.0.1:7401", 0, false},
		{"ctxd-0:7401", 0, false},
		{"0.0.0.0", 0, false},
		{"0.0.0.0:99999", 0, false},
	}
	for _, tt := range tests {
		p, err := ListenPort("listen", tt.addr)
		if (err == nil) != tt.ok || p != tt.port {
			t.Errorf("ListenPort(%q) = %d, %v; want %d, ok=%v", tt.addr, p, err, tt.port, tt.ok)
		}
	}
}
