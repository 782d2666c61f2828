package main

import (
	"net"
	"runtime"
	"time"

	"golang.org/x/net/ipv4"
)

// floorBatch is the sendmmsg/recvmmsg batch size of the floor measurement.
const floorBatch = 64

// floorUsPerProbe measures the kernel's cost of one send plus one receive
// of a probe-sized datagram on loopback, batched with sendmmsg and
// recvmmsg, in CPU microseconds: the least a prober process can spend per
// probe (it sends a request and receives a response). It sends count
// datagrams of size bytes from one socket to another, one batch at a time.
func floorUsPerProbe(size, count int) (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer a.Close()
	b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer b.Close()
	_ = b.SetReadBuffer(4 << 20)
	tx, rx := ipv4.NewPacketConn(a), ipv4.NewPacketConn(b)
	out, in := floorMessages(size, b.LocalAddr()), floorMessages(2048, nil)
	cpu0 := cpuTime()
	for sent := 0; sent < count; sent += floorBatch {
		if err := floorRound(tx, rx, out, in); err != nil {
			return 0, err
		}
	}
	return float64((cpuTime() - cpu0).Nanoseconds()) / 1e3 / float64(count), nil
}

// floorRound sends one batch and receives it.
func floorRound(tx, rx *ipv4.PacketConn, out, in []ipv4.Message) error {
	for off := 0; off < len(out); {
		n, err := tx.WriteBatch(out[off:], 0)
		if err != nil {
			return err
		}
		off += n
	}
	if err := rx.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	for got := 0; got < len(out); {
		n, err := rx.ReadBatch(in[:len(out)-got], 0)
		if err != nil {
			return err
		}
		got += n
	}
	return nil
}

func floorMessages(size int, dst net.Addr) []ipv4.Message {
	ms := make([]ipv4.Message, floorBatch)
	for i := range ms {
		ms[i] = ipv4.Message{Buffers: [][]byte{make([]byte, size)}, Addr: dst}
	}
	return ms
}
