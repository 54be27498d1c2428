r"""``k`` float64 lanes in one LLVM vector value: a row's scores, or a row of ``W``.

Why this is hand-written: Numba has no SIMD type, and LLVM's vectorizers leave the
kernels' k-long gather ``s[j] += a * W[f, j]`` scalar when ``k`` is a small compile-time
constant (the loop is unrolled into ``k`` scalar chains before the loop vectorizer sees
it, and the SLP vectorizer does not start from loop-carried sums): each feature of a
row then costs k loads, k multiplies and k adds, in both the gather and the scatter.
:class:`Lanes` is a Numba type whose value is an LLVM ``<k x double>``; the intrinsics below load, multiply-add and store it.  Each lane does exactly the
scalar code's IEEE operations in the same order (a product rounded, then a sum
rounded: ``fmul`` and ``fadd`` without fast-math flags, which LLVM never contracts into
a fused multiply-add), so every result is bitwise the same as the scalar loop's.

Only the kernel builds for ``k <= SMALL_K`` use it (``ktag``, a tuple of ``k`` zeros,
gives the width at compile time); generic builds keep their scalar loops.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, models, register_model

__all__ = ["Lanes", "lanes", "lanes_zero", "lanes_load", "lanes_load_row", "lanes_madd", "lanes_store",
           "lanes_store_row"]

_F64 = ir.DoubleType()


class Lanes(types.Type):
    """``n`` float64 values held as one LLVM vector."""

    def __init__(self, n: int):
        self.n = int(n)
        super().__init__(name=f"Lanes({self.n})")


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(_F64, fe_type.n))


def lanes(ktag) -> bool:
    """At typing time: does ``ktag``'s type give a lane count (a non-empty tuple)?"""
    return isinstance(ktag, types.UniTuple) and ktag.count > 0


def _vector_pointer(context, builder, aryty, ary, index):
    """The address of ``ary[index]`` (``index`` a list of intp values), where the lanes start."""
    arr = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr, index, wraparound=False)


def _float64_array(ary, ndim) -> bool:
    return isinstance(ary, types.Array) and ary.dtype == types.float64 and ary.ndim == ndim and ary.layout == "C"


@intrinsic
def lanes_zero(typingctx, ktag):
    """``len(ktag)`` lanes of +0.0."""
    if not lanes(ktag):
        return None
    n = ktag.count

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.VectorType(_F64, n), None)  # zeroinitializer: +0.0
    return Lanes(n)(ktag), codegen


def _load(builder, ptr, n):
    vp = builder.bitcast(ptr, ir.VectorType(_F64, n).as_pointer())
    return builder.load(vp, align=8)


def _store(builder, vec, ptr, n):
    vp = builder.bitcast(ptr, ir.VectorType(_F64, n).as_pointer())
    builder.store(vec, vp, align=8)


@intrinsic
def lanes_load(typingctx, ary, ktag):
    """``ary[0:len(ktag)]`` of a 1-D float64 array (the caller guarantees the length)."""
    if not (lanes(ktag) and _float64_array(ary, 1)):
        return None
    n = ktag.count

    def codegen(context, builder, sig, args):
        ptr = _vector_pointer(context, builder, sig.args[0], args[0], [context.get_constant(types.intp, 0)])
        return _load(builder, ptr, n)
    return Lanes(n)(ary, ktag), codegen


@intrinsic
def lanes_load_row(typingctx, ary, f, ktag):
    """``ary[f, 0:len(ktag)]`` of a 2-D C-contiguous float64 array."""
    if not (lanes(ktag) and _float64_array(ary, 2)):
        return None
    n = ktag.count

    def codegen(context, builder, sig, args):
        f_ = context.cast(builder, args[1], sig.args[1], types.intp)
        ptr = _vector_pointer(context, builder, sig.args[0], args[0], [f_, context.get_constant(types.intp, 0)])
        return _load(builder, ptr, n)
    return Lanes(n)(ary, f, ktag), codegen


@intrinsic
def lanes_madd(typingctx, acc, a, vec):
    """``acc + a * vec`` lane by lane (the product rounded, then the sum: never fused);
    ``a`` a scalar, widened to float64 first as NumPy's mixed arithmetic does."""
    if not (isinstance(acc, Lanes) and isinstance(vec, Lanes) and acc.n == vec.n
            and isinstance(a, (types.Float, types.Integer))):
        return None
    n = acc.n

    def codegen(context, builder, sig, args):
        a64 = context.cast(builder, args[1], sig.args[1], types.float64)
        splat = ir.Constant(ir.VectorType(_F64, n), None)
        for j in range(n):
            splat = builder.insert_element(splat, a64, ir.Constant(ir.IntType(32), j))
        return builder.fadd(args[0], builder.fmul(splat, args[2]))
    return Lanes(n)(acc, a, vec), codegen


@intrinsic
def lanes_store(typingctx, vec, ary):
    """``ary[0:n] = vec`` for a 1-D float64 array."""
    if not (isinstance(vec, Lanes) and _float64_array(ary, 1)):
        return None
    n = vec.n

    def codegen(context, builder, sig, args):
        ptr = _vector_pointer(context, builder, sig.args[1], args[1], [context.get_constant(types.intp, 0)])
        _store(builder, args[0], ptr, n)
        return context.get_dummy_value()
    return types.void(vec, ary), codegen


@intrinsic
def lanes_store_row(typingctx, vec, ary, f):
    """``ary[f, 0:n] = vec`` for a 2-D C-contiguous float64 array."""
    if not (isinstance(vec, Lanes) and _float64_array(ary, 2)):
        return None
    n = vec.n

    def codegen(context, builder, sig, args):
        f_ = context.cast(builder, args[2], sig.args[2], types.intp)
        ptr = _vector_pointer(context, builder, sig.args[1], args[1], [f_, context.get_constant(types.intp, 0)])
        _store(builder, args[0], ptr, n)
        return context.get_dummy_value()
    return types.void(vec, ary, f), codegen
