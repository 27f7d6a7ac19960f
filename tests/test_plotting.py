"""Chinese labels render with a real CJK font, and a glyph no font has is an error, never a box."""

from __future__ import annotations

import warnings

import pytest

from fresh_python import run_python

# A rare ideograph from CJK Extension B, which WenQuanYi Micro Hei does not cover.
MISSING_GLYPH = "\U00020000"


def test_chinese_labels_render_with_the_cjk_font_and_no_warning():
    result = run_python(
        """
        import warnings
        warnings.simplefilter("error")
        import matplotlib.pyplot as plt
        from matplotlib.font_manager import findfont, FontProperties
        from attention_course.plotting import use_course_style, cjk_font_file
        family = use_course_style()
        fig, ax = plt.subplots()
        ax.set_title("汤姆 追逐 杰瑞")
        fig.canvas.draw()
        # the title's characters are drawn from the CJK font file
        print(findfont(FontProperties(family=family)) == str(cjk_font_file()))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_a_missing_glyph_fails_instead_of_drawing_a_box():
    result = run_python(
        f"""
        import matplotlib.pyplot as plt
        from attention_course.plotting import use_course_style
        use_course_style()
        fig, ax = plt.subplots()
        ax.set_title("汤姆 {MISSING_GLYPH}")
        fig.canvas.draw()
        """
    )
    assert result.returncode != 0
    assert "missing from font" in result.stderr


def test_a_missing_glyph_inside_mathtext_fails_too():
    # mathtext draws with its own fonts and words the warning differently.
    result = run_python(
        """
        import matplotlib.pyplot as plt
        from attention_course.plotting import use_course_style
        use_course_style()
        fig, ax = plt.subplots()
        ax.set_xlabel("$a_i$ 权重 $\\mathrm{权}$")
        fig.canvas.draw()
        """
    )
    assert result.returncode != 0
    assert "MissingGlyphError" in result.stderr and "does not have a glyph" in result.stderr


def test_without_the_course_style_matplotlib_only_warns():
    # The reason use_course_style exists: by default a missing glyph is a warning and a box.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
            fig, ax = plt.subplots()
            ax.set_title("汤姆")
            fig.canvas.draw()
        plt.close(fig)
    assert any("missing from font" in str(w.message) for w in caught)


def test_a_wrong_font_override_is_reported_clearly():
    result = run_python(
        """
        from attention_course.plotting import use_course_style
        use_course_style()
        """,
        ATTENTION_COURSE_CJK_FONT="/nonexistent/font.ttc",
    )
    assert result.returncode != 0
    assert "CJKFontNotFound" in result.stderr and "/nonexistent/font.ttc" in result.stderr
