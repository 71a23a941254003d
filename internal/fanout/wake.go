package fanout

import (
	"time"
)

// wakeLocked wakes the readers now.
func (f *feed) wakeLocked() {
	if f.wakeTimer != nil {
		f.wakeTimer.Stop()
		f.wakeTimer = nil
	}
	close(f.wake)
	f.wake = make(chan struct{})
	f.woken = time.Now()
}

// wakeSoonLocked wakes the readers now if the last wake-up is wakeGap ago,
// or else when it will be: a wake-up of many readers is one goroutine
// switch and one client write each, which at a thousand readers and a
// thousand events a second is more than a small machine has, while a
// few milliseconds' wait lets each take several events at once.
func (f *feed) wakeSoonLocked() {
	if f.wakeTimer != nil {
		return // the pending wake-up takes these events too
	}
	gap := f.wakeGap()
	wait := gap - time.Since(f.woken)
	if gap <= 0 || wait <= 0 {
		f.wakeLocked()
		return
	}
	f.wakeTimer = time.AfterFunc(wait, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.wakeTimer != nil {
			f.wakeTimer = nil
			f.wakeLocked()
		}
	})
}

// wakeGap is the least time between two wake-ups of f's readers.
func (f *feed) wakeGap() time.Duration {
	o := f.h.opts
	if o.WakePerReader < 0 {
		return 0
	}
	return min(o.MaxWakeDelay, time.Duration(f.ringReaders.Load())*o.WakePerReader)
}
