"""The record batch format (Kafka's RecordBatch v2 shape): the one encoder
(``batch_builder``), the one header packer and parser (``batch_format``), the one
record decoder (``record_decoder``, which ``batch_reader``, ``rewrite`` and the
Spark connector all call), codecs and varints, and batch rewriting for compaction
(``rewrite``). Above ``engine.base`` only.

Every floor that touches bytes uses it: the data log and the journals store batches, the
copier recognises a copied one by its header, the broker checks each produced batch, the
clients build batches, and the Kafka listener and the Spark connector decode them.
"""
