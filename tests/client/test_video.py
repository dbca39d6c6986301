"""`tandem eval --video`'s files: H.264 where this OpenCV encodes it (browsers play only that), else mp4v and a note."""

from __future__ import annotations

import numpy as np

from tandem.client.api.video import VideoWriter, usable_codec


class Frames:
    """An env whose render() gives an RGB frame, brighter each time."""

    def __init__(self) -> None:
        self.n = 0

    def render(self) -> np.ndarray:
        self.n += 1
        return np.full((48, 64, 3), 10 * self.n, np.uint8)


def test_a_video_is_h264_where_opencv_encodes_it_else_mp4v_with_a_note_and_no_ffmpeg_noise(tmp_path, caplog, capfd):
    import cv2

    usable_codec.cache_clear()
    writer, env = VideoWriter(tmp_path / "episode-000.mp4", 30.0), Frames()
    for _ in range(5):
        writer.add(env)
    writer.close()
    codec = usable_codec((64, 48))
    assert codec in ("avc1", "mp4v")
    if codec == "mp4v":  # the pip wheels of OpenCV: no H.264 encoder
        assert "no H.264 (avc1) encoder" in caplog.text and "browsers do not play" in caplog.text, caplog.text
    else:
        assert "H.264" not in caplog.text
    # the failed H.264 try is FFmpeg's own business: none of its lines reach the user's terminal
    assert "h264" not in capfd.readouterr().err.lower()
    capture = cv2.VideoCapture(str(tmp_path / "episode-000.mp4"))
    fourcc = int(capture.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode(errors="replace")
    frames = 0
    while capture.read()[0]:
        frames += 1
    capture.release()
    # as OpenCV's reader names them: MPEG-4 Part 2 reads back as FMP4
    assert frames == 5 and fourcc.lower() in {"avc1": ("avc1", "h264"), "mp4v": ("mp4v", "fmp4")}[codec], fourcc
