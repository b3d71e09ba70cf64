"""Tests of ``twinlog.engine.broker``: the embedded broker, group offsets, the partitions
and their replicas, and a broker SIGKILLed at every failpoint then reopened."""
