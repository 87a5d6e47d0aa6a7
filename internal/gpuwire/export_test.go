package gpuwire

// BusRe is busRe, for the test that compares it with the reset-gpu
// template's regex.
var BusRe = busRe
