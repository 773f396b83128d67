'use strict';
// The last few hundred measurements of one kind (isolate start times), for a last value and a
// median in /icebox/stats without keeping every sample of a long-lived instance.

const DEFAULT_SIZE = 256;

class SampleWindow {
  constructor(size = DEFAULT_SIZE) {
    this.size = size;
    this.values = [];
    this.next = 0; // where the next sample overwrites the oldest once the window is full
    this.latest = null;
  }

  add(value) {
    if (this.values.length < this.size) this.values.push(value);
    else this.values[this.next] = value;
    this.next = (this.next + 1) % this.size;
    this.latest = value;
  }

  last() {
    return this.latest;
  }

  median() {
    if (this.values.length === 0) return null;
    const sorted = [...this.values].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
}

module.exports = { SampleWindow };
