"""Software prefetch for numba kernels.

The feature kernels are bound by random accesses to weight tables of tens of MB: each
access misses the caches, and a loop that computes a hash and then loads from it keeps
only a few misses in flight. Computing a batch of addresses first and prefetching them
lets the memory system work on many at once; the loads that follow then hit the cache.

``prefetch(a, i)`` / ``prefetch_write(a, i)`` hint that the element at flat index ``i`` of
the C-contiguous array ``a`` (``a.ravel()[i]``) will soon be read / written. A hint only:
it never faults (any index is safe) and changes no result; on an array that is not
C-contiguous it does nothing.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _prefetch_codegen(rw: int, contiguous: bool):
    def codegen(context, builder, signature, args):
        if not contiguous:      # strided: no flat address to hint at; do nothing
            return context.get_dummy_value()
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
        i32 = ir.IntType(32)
        # llvm.prefetch(address, rw, locality 0..3 (3: keep in all cache levels), data)
        # "p0i8" is the typed-pointer name; newer LLVMs remangle it for opaque pointers
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [ptr, i32(rw), i32(3), i32(1)])
        return context.get_dummy_value()
    return codegen


def _accepts(arr, index) -> bool:
    return isinstance(arr, types.Array) and isinstance(index, types.Integer)


@intrinsic
def prefetch(typingctx, arr, index):
    """Hint that ``arr.ravel()[index]`` will be read soon (no effect on results)."""
    if not _accepts(arr, index):
        return None
    return types.void(arr, index), _prefetch_codegen(0, arr.layout == "C")


@intrinsic
def prefetch_write(typingctx, arr, index):
    """Hint that ``arr.ravel()[index]`` will be written soon (no effect on results)."""
    if not _accepts(arr, index):
        return None
    return types.void(arr, index), _prefetch_codegen(1, arr.layout == "C")
