"""Tests of ``twinlog.engine.broker``: the embedded broker, the transaction coordinator,
group offsets, and a broker SIGKILLed at every failpoint then reopened."""
