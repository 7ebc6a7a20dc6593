"""Every ``arelu bench`` benchmark and the timing and peak-memory helpers they share: speed
and memory are measured here into CSVs, never by timed unit tests."""
