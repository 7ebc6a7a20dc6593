"""IWSLT'14 formats (train.tags, XML <seg>) and fairseq's every-23rd validation split."""

from __future__ import annotations

from arelu_cli.data.iwslt import split_valid, train_tags_lines, xml_segments

XML = """<?xml version="1.0" encoding="UTF-8"?>
<mteval>
<srcset setid="iwslt2014-dev2010" srclang="german">
<doc docid="69" genre="lectures">
<url>http://www.ted.com/talks/x.html</url>
<description>Eine Beschreibung.</description>
<keywords>culture</keywords>
<talkid>69</talkid>
<title>Ein Titel</title>
<seg id="1"> Wissen Sie, &quot;Reisen&quot; &amp; Forschung. </seg>
<seg id="2">Zweiter Satz.</seg>
</doc>
</srcset>
</mteval>
"""

TAGS = """<url>http://www.ted.com/talks/x.html</url>
<keywords>talks, culture</keywords>
<speaker>Jane Doe</speaker>
<talkid>1</talkid>
<title>Ein Titel</title>
<description>TED Talk Subtitles and Transcript: Worum es geht.</description>
Erster Satz.
Zweiter Satz, mit &amp; im Text.
"""


def test_xml_segments(tmp_path):
    path = tmp_path / "IWSLT14.TED.dev2010.de-en.de.xml"
    path.write_text(XML, encoding="utf-8")
    assert xml_segments(path) == ['Wissen Sie, "Reisen" & Forschung.', "Zweiter Satz."]


def test_train_tags_keeps_title_and_description_text(tmp_path):
    path = tmp_path / "train.tags.de-en.de"
    path.write_text(TAGS, encoding="utf-8")
    assert train_tags_lines(path) == [
        "Ein Titel", "TED Talk Subtitles and Transcript: Worum es geht.", "Erster Satz.",
        "Zweiter Satz, mit &amp; im Text."]


def test_split_valid_takes_every_23rd_pair():
    src = [f"s{i}" for i in range(1, 101)]
    tgt = [f"t{i}" for i in range(1, 101)]
    (train_src, train_tgt), (valid_src, valid_tgt) = split_valid(src, tgt)
    assert valid_src == ["s23", "s46", "s69", "s92"] and valid_tgt == ["t23", "t46", "t69", "t92"]
    assert len(train_src) == 96 and "s23" not in train_src and train_tgt[22] == "t24"
