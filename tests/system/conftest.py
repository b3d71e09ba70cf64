"""Whole-system tests: real processes SIGKILLed at random and at every failpoint (the fault
harness), damaged and full disks, zombies, read-process-write under kills, load."""
